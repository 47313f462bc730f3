/*
 * require-shim.js: a tiny stand-in for RequireJS, for reading the course offline.
 *
 * Some notebook outputs (bertviz's attention views) load d3 and jQuery through RequireJS from a CDN:
 *     require.config({paths: {d3: "https://...", jquery: "https://..."}});
 *     requirejs(["jquery", "d3"], function ($, d3) { ... });
 * The site ships d3 5.7 and jQuery as plain <script> files (assets/vendor/), so both are globals. When no real
 * module loader is present (offline, or before a CDN copy of require.js arrives), this shim answers such calls
 * from the globals. When a real RequireJS is already on the page it does nothing.
 */
(function (root) {
  "use strict";
  if (typeof root.requirejs === "function" || typeof root.require === "function") {
    return; // a real loader is present: leave it alone
  }
  var globals = {
    d3: function () { return root.d3; },
    jquery: function () { return root.jQuery; },
    jQuery: function () { return root.jQuery; }
  };
  function resolve(name) {
    var get = globals[name];
    var module = get ? get() : root[name];
    if (module === undefined) {
      throw new Error("require-shim: module '" + name + "' is not available offline");
    }
    return module;
  }
  function shimRequire(deps, callback) {
    if (typeof deps === "string") {
      return resolve(deps); // synchronous form: require("d3")
    }
    var modules = (deps || []).map(resolve);
    if (typeof callback === "function") {
      callback.apply(root, modules);
    }
    return undefined;
  }
  shimRequire.config = function () { return shimRequire; }; // CDN paths are ignored
  shimRequire.isShim = true;
  root.requirejs = shimRequire;
  root.require = shimRequire;
})(window);
