// Firefox, chrome context: with arguments[0] "open", how many requests watch-network.js recorded have not
// ended; with "take", also the requests as WebDriver BiDi network events (the shape harness/browser/har.py
// reads), in request order, and how often the recorder failed, all then removed, so a browser that serves
// many visits gives each visit its own. The answer is one JSON string: Marionette would otherwise copy the
// returned object value by value for WebDriver, in the parent, which took most of a visit's collection.
const log = window.__dnsstudyNetwork;
if (!log) throw new Error("the request recorder is not running");
const open = log.order.filter(r => !r.stopped).length;
if (arguments[0] === "open") return JSON.stringify({open});
const events = log.order.map(r => {
  const request = {
    request: r.id, url: r.url, method: r.method, headers: r.requestHeaders || [], cookies: [],
    headersSize: -1, bodySize: r.stopped ? r.bodySize : null, timings: r.timings || {requestTime: r.timestamp},
  };
  const params = {request, redirectCount: 0, timestamp: r.timestamp};
  let method = "network.beforeRequestSent";
  if (r.error !== null) {
    method = "network.fetchError";
    params.errorText = r.error;
  } else if (r.response) {
    method = r.stopped ? "network.responseCompleted" : "network.responseStarted";
  }
  if (r.response) params.response = r.response;
  return {type: "event", method, params};
});
const failures = {count: log.failures, first: log.failure};
log.order = [];
log.byChannel.clear();
log.failures = 0;
log.failure = "";
return JSON.stringify({events, open, failures});
