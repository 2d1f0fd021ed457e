// Firefox, chrome context: records every HTTP request of the pages, from the parent process, for the HAR.
// It replaces WebDriver BiDi's network events, whose DevTools observer passes every response body through
// JavaScript on the parent's main thread and doubled the lab's onLoad (docs/visit.md). Three calls per
// request, none on the data path: the request (http-on-modify-request), its response's head
// (http-on-examine-*), its end (http-on-stop-request). read-network.js returns them as BiDi-shaped events.
// A function body: WebDriver wraps it.
const log = {order: [], byChannel: new Map()};
window.__dnsstudyNetwork = log;
const system = Services.scriptSecurityManager.getSystemPrincipal();
// As BiDi: the browser's own requests (its DoH, updates) are no page's.
const ignored = channel => {
  const info = channel.loadInfo;
  return !!info && info.loadingDocument === null && (info.loadingPrincipal === system || info.isInDevToolsContext);
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
const onRequest = subject => {
  const channel = http(subject);
  if (!channel || ignored(channel) || log.byChannel.has(channel.channelId)) return;
  const record = {
    id: String(channel.channelId), url: channel.URI.spec, method: channel.requestMethod,
    timestamp: Date.now(), response: null, stopped: false, error: null, timings: null,
  };
  log.byChannel.set(channel.channelId, record);
  log.order.push(record);
};
const onResponse = (subject, topic) => {
  const channel = http(subject);
  const record = channel && log.byChannel.get(channel.channelId);
  if (!record) return;
  let mimeType = "";
  try { mimeType = channel.contentType + (channel.contentCharset ? `;charset=${channel.contentCharset}` : ""); } catch (e) {}
  record.response = {
    url: channel.URI.spec, status: channel.responseStatus, statusText: channel.responseStatusText,
    protocol: channel.protocolVersion || "", mimeType, headers: headers(v => channel.visitResponseHeaders(v)),
    fromCache: topic === "http-on-examine-cached-response",
  };
};
const onStop = subject => {
  const channel = http(subject);
  const record = channel && log.byChannel.get(channel.channelId);
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
  // A redirect's channel stops with NS_BINDING_REDIRECTED after its response: answered, not failed.
  if (!Components.isSuccessCode(channel.status) && !(record.response && channel.status === Cr.NS_BINDING_REDIRECTED)) {
    record.error = ChromeUtils.getXPCOMErrorName(channel.status);
  }
};
const observer = {observe(subject, topic) {
  try {
    if (topic === "http-on-modify-request") onRequest(subject);
    else if (topic === "http-on-stop-request") onStop(subject);
    else onResponse(subject, topic);
  } catch (e) {}
}};
for (const topic of ["http-on-modify-request", "http-on-examine-response", "http-on-examine-cached-response",
                     "http-on-examine-merged-response", "http-on-stop-request"]) {
  Services.obs.addObserver(observer, topic);
}
return true;
