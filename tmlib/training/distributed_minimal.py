"""The smallest data-parallel training program: each process trains one linear layer on its own share of every
batch, with PyTorch's ``DistributedDataParallel``; the book's page on scaling out shows and runs it:

    torchrun --standalone --nproc_per_node=2 -m tmlib.training.distributed_minimal

Each process prints its loss (on its own share) and the layer's weights after every step.
"""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main(steps: int = 3) -> None:
    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # other starting weights in every process...
    model = DistributedDataParallel(torch.nn.Linear(3, 1))  # ...until DDP copies rank 0's to all
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(0)  # the same batches in every process
    for step in range(1, steps + 1):
        x = torch.randn(8, 3, generator=data)  # the step's batch: 8 examples
        y = x.sum(dim=1, keepdim=True)
        mine = slice(rank, None, world_size)  # this process's share: every world_size-th example
        loss = torch.nn.functional.mse_loss(model(x[mine]), y[mine])
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients during the backward pass: their mean
        optimizer.step()
        weights = " ".join(f"{w:+.4f}" for w in model.module.weight.detach().flatten().tolist())
        line = f"step {step} rank {rank}: loss on its share {loss.item():.4f}, weights {weights}\n"
        sys.stdout.write(line)  # one write per line, so the two processes' lines do not run together
        sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
