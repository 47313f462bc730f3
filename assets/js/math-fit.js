/* Display equations that are wider than the page's column are set smaller, down to 70% of their size, so that
   they fit; what still does not fit (on a phone) scrolls sideways, with a visible scrollbar (css/course.css).
   MathJax 3 does not break long equations into lines. Runs after MathJax's first typeset and on resize. */
(function () {
  "use strict";
  var MIN_SCALE = 0.7;
  function fit() {
    var boxes = document.querySelectorAll('mjx-container[display="true"]');
    for (var i = 0; i < boxes.length; i++) {
      var m = boxes[i];
      m.style.fontSize = "";
      var need = m.scrollWidth, have = m.clientWidth;
      if (have > 0 && need > have + 1) {
        m.style.fontSize = (100 * Math.max(MIN_SCALE, (have - 2) / need)).toFixed(1) + "%";
        m.setAttribute("data-tm-scaled", "1");
      }
    }
  }
  function start() {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      window.MathJax.startup.promise.then(fit);
    } else {
      setTimeout(start, 50);
    }
  }
  window.addEventListener("load", start);
  var timer = null;
  window.addEventListener("resize", function () { clearTimeout(timer); timer = setTimeout(fit, 150); });
})();
