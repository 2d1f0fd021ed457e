// Firefox, chrome context: records every HTTP request of the pages, from the parent process, for the HAR.
// It replaces WebDriver BiDi's network events, whose DevTools observer passes every response body through
// JavaScript on the parent's main thread and doubled the lab's onLoad (docs/visit.md). A few calls per
// request, none on the data path: before it connects (http-on-before-connect, after Firefox's internal
// redirects: HSTS and HTTPS upgrades, as BiDi's observer), its response's head (http-on-examine-*), its end
// (http-on-stop-request). read-network.js returns them as BiDi-shaped events. A function body: WebDriver
// wraps it.
const log = {order: [], byChannel: new Map(), failures: 0, failure: ""};
window.__dnsstudyNetwork = log;
const system = Services.scriptSecurityManager.getSystemPrincipal();
// As BiDi: the browser's own requests (its DoH, updates) and requests of no browsing context (service and
// shared workers) are no page's.
const ignored = channel => {
  const info = channel.loadInfo;
  if (!info) return true;
  if (info.loadingDocument === null && (info.loadingPrincipal === system || info.isInDevToolsContext)) return true;
  return !(info.frameBrowsingContextID || info.browsingContextID || info.associatedBrowsingContextID);
};
// As BiDi (DevTools' NetworkUtils): statuses of requests that were answered, or ended by the browser on
// purpose, are no failure.
const NOT_FAILED = ["NS_ERROR_PARSED_DATA_CACHED", "NS_IMAGELIB_ERROR_FAILURE", "NS_BINDING_REDIRECTED",
                    "NS_ERROR_ABORT", "NS_ERROR_NET_EMPTY_RESPONSE"];
const failure = (status, fromCache) => {
  if (Components.isSuccessCode(status)) return null;
  const name = ChromeUtils.getXPCOMErrorName(status);
  return NOT_FAILED.includes(name) || (fromCache && name === "NS_BINDING_ABORTED") ? null : name;
};
const headers = visit => {
  const out = [];
  try { visit({visitHeader(name, value) { out.push({name, value: {type: "string", value}}); }}); } catch (e) {}
  return out;
};
const ms = us => (us ? us / 1000 : 0);  // nsITimedChannel: microseconds since the epoch, 0 = unset
const timings = channel => {
  const t = channel.QueryInterface(Ci.nsITimedChannel);
  return {
    requestTime: ms(t.asyncOpenTime), dnsStart: ms(t.domainLookupStartTime), dnsEnd: ms(t.domainLookupEndTime),
    connectStart: ms(t.connectStartTime), connectEnd: ms(t.connectEndTime),
    tlsStart: ms(t.secureConnectionStartTime), tlsEnd: ms(t.connectEndTime),
    requestStart: ms(t.requestStartTime), responseStart: ms(t.responseStartTime), responseEnd: ms(t.responseEndTime),
  };
};
const http = subject => {
  try { return subject.QueryInterface(Ci.nsIHttpChannel); } catch (e) { return null; }
};
const onRequest = channel => {
  if (ignored(channel) || log.byChannel.has(channel.channelId)) return log.byChannel.get(channel.channelId);
  const record = {
    id: String(channel.channelId), url: channel.URI.spec, method: channel.requestMethod,
    timestamp: Date.now(), response: null, stopped: false, error: null, timings: null,
  };
  log.byChannel.set(channel.channelId, record);
  log.order.push(record);
  return record;
};
const onResponse = (channel, topic) => {
  const record = log.byChannel.get(channel.channelId);
  if (!record) return;
  let mimeType = "";
  try { mimeType = channel.contentType + (channel.contentCharset ? `;charset=${channel.contentCharset}` : ""); } catch (e) {}
  record.response = {
    url: channel.URI.spec, status: channel.responseStatus, statusText: channel.responseStatusText,
    protocol: channel.protocolVersion || "", mimeType, headers: headers(v => channel.visitResponseHeaders(v)),
    fromCache: topic === "http-on-examine-cached-response",
  };
};
const onStop = channel => {
  let record = log.byChannel.get(channel.channelId);
  const failed = failure(channel.status, !!record?.response?.fromCache);
  if (!record && failed) record = onRequest(channel);  // failed before it would connect (blocked, refused)
  if (!record) return;
  record.stopped = true;
  record.requestHeaders = headers(v => channel.visitRequestHeaders(v));
  // A request without an upload stream has no body; the size of one with a body is not known here.
  let upload = null;
  try { upload = channel.QueryInterface(Ci.nsIUploadChannel).uploadStream; } catch (e) {}
  record.bodySize = upload ? null : 0;
  record.timings = timings(channel);
  if (record.response) {
    Object.assign(record.response, {
      bytesReceived: channel.transferSize, bodySize: channel.encodedBodySize,
      headersSize: Math.max(channel.transferSize - channel.encodedBodySize, 0),
      content: {size: channel.decodedBodySize},
    });
  }
  record.error = failed;
};
const observer = {observe(subject, topic) {
  const channel = http(subject);
  if (!channel) return;
  try {
    if (topic === "http-on-before-connect") onRequest(channel);
    else if (topic === "http-on-stop-request" || topic === "http-on-failed-opening-request") onStop(channel);
    else onResponse(channel, topic);
  } catch (e) {  // the HAR would miss this request: counted, and the visit is the harness's failure
    log.failures += 1;
    log.failure = log.failure || `${topic}: ${e}`;
  }
}};
for (const topic of ["http-on-before-connect", "http-on-examine-response", "http-on-examine-cached-response",
                     "http-on-examine-merged-response", "http-on-stop-request", "http-on-failed-opening-request"]) {
  Services.obs.addObserver(observer, topic);
}
return true;
