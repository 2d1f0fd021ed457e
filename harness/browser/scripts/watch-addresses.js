// Firefox, chrome context (geckodriver --allow-system-access): from the parent process, records the
// address each HTTP response came from, which BiDi does not report. A function body: WebDriver wraps it.
const seen = [];
window.__dnsstudyAddresses = seen;
const observer = { observe(subject) {
  try {
    const channel = subject.QueryInterface(Ci.nsIHttpChannel);
    const internal = subject.QueryInterface(Ci.nsIHttpChannelInternal);
    let address = "", port = 0;
    try { address = internal.remoteAddress; port = internal.remotePort; } catch (e) {}
    seen.push({url: channel.URI.spec, address: address, port: port, protocol: channel.protocolVersion});
  } catch (e) {}
}};
Services.obs.addObserver(observer, "http-on-examine-response");
return true;
