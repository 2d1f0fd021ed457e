// Firefox, chrome context, asynchronous: clear everything one visit could leave to the next in a browser
// that serves many (harness/browser/reused.py). Services.clearData with CLEAR_ALL runs every cleaner of
// toolkit/components/cleardata/ClearDataService.sys.mjs: cookies, the HTTP, image, CSS and JS caches, site
// storage and service workers (QuotaCleaner), HSTS, TLS session tickets (TlsTokenCacheCleaner), the
// preflight cache, and session history ("browser:purge-session-history": nsHttpHandler drops alt-svc
// mappings and connection history on it). Then the connections: "net:prune-all-connections" closes every
// idle HTTP connection (the previous visit's tab is closed, so all are idle; the browser's DoH connection
// is one of them) and marks any still active as not reusable; the DNS cache goes last, TRR's with it.
const done = arguments[arguments.length - 1];
(async () => {
  const started = Date.now();
  await new Promise(resolve => Services.clearData.deleteData(Ci.nsIClearDataService.CLEAR_ALL, { onDataDeleted: resolve }));
  Cc["@mozilla.org/psm;1"].getService(Ci.nsINSSComponent).clearSSLExternalAndInternalSessionCache();
  Services.obs.notifyObservers(null, "net:prune-all-connections");
  Services.dns.clearCache(true);
  if (window.__dnsstudyAddresses) window.__dnsstudyAddresses.length = 0;
  return { ms: Date.now() - started };
})().then(done, e => done({ error: String(e) }));
