// Live updates: when the status branch moves, the server sends a "status"
// event; the page fetches itself again and swaps its main content, keeping
// focus and scroll. Without JavaScript the pages still work: reload them.
(function () {
  if (!window.EventSource || !window.fetch) return;
  // The first event names the branch's commit when the stream opened,
  // which may be newer than the page: fetch then too, and swap only what
  // changed.
  var src = new EventSource("/events");
  src.addEventListener("status", function () {
    fetch(location.href, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) return;
      var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
      var main = document.querySelector("main");
      if (!next || !main || next.innerHTML === main.innerHTML) return;
      var focused = document.activeElement && document.activeElement.id;
      main.innerHTML = next.innerHTML;
      var live = document.getElementById("live");
      if (live) live.textContent = "Updated " + new Date().toLocaleTimeString();
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
    });
  });
})();
