// Search on a site opened from disk (file://). A browser refuses a Worker from a file:// page, and
// the search runs in a Worker; mkdocs-material's offline plugin then loads a shim from unpkg.com,
// which a machine without the network cannot reach. This is that shim, kept with the site: a
// Worker that runs its script in a hidden iframe of the page and passes messages both ways.
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IframeWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.queue = [];
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      this.frame.setAttribute("aria-hidden", "true");
      document.body.appendChild(this.frame);
      const scope = this.frame.contentWindow;
      const worker = this;
      // what the worker's script calls: postMessage answers the page
      scope.postMessage = function (data) {
        setTimeout(function () {
          const event = new MessageEvent("message", { data: data });
          worker.dispatchEvent(event);
          if (typeof worker.onmessage === "function") worker.onmessage(event);
        });
      };
      scope.importScripts = function () {
        throw new Error("importScripts is not available to a worker opened from disk");
      };
      const script = scope.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = function () {
        worker.ready = true;
        worker.queue.splice(0).forEach(function (data) { worker.postMessage(data); });
      };
      scope.document.head.appendChild(script);
    }

    // what the page calls: a message event in the worker's scope
    postMessage(data) {
      if (!this.ready) { this.queue.push(data); return; }
      const scope = this.frame.contentWindow;
      setTimeout(function () {
        scope.dispatchEvent(new scope.MessageEvent("message", { data: data }));
      });
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = IframeWorker;
})();
