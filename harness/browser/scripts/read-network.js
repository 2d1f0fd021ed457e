// Firefox, chrome context: the requests watch-network.js recorded, as WebDriver BiDi network events (the
// shape harness/browser/har.py reads), in request order; with arguments[0] true they are also removed, so a
// browser that serves many visits gives each visit its own. Also how many have not ended yet.
const log = window.__dnsstudyNetwork;
if (!log) return {events: [], open: 0};
const events = [];
let open = 0;
for (const r of log.order) {
  const request = {
    request: r.id, url: r.url, method: r.method, headers: r.requestHeaders || [], cookies: [],
    headersSize: -1, bodySize: r.stopped ? r.bodySize : null, timings: r.timings || {requestTime: r.timestamp},
  };
  const params = {request, redirectCount: 0, timestamp: r.timestamp};
  if (!r.stopped) open += 1;
  let method = "network.beforeRequestSent";
  if (r.error !== null) {
    method = "network.fetchError";
    params.errorText = r.error;
  } else if (r.response) {
    method = r.stopped ? "network.responseCompleted" : "network.responseStarted";
  }
  if (r.response) params.response = r.response;
  events.push({type: "event", method, params});
}
if (arguments[0]) {
  log.order = [];
  log.byChannel.clear();
}
return {events, open};
