// Waits until Firefox's pool of content processes launched ahead of need is full, or `limitMs` passed.
// Firefox keeps `dom.ipc.processPrelaunch.fission.number` processes ready ("preallocated"); a navigation that
// finds the pool short launches one on its own path. The pool refills a while after each use, so a reused
// browser's visit right after its start (the warm-up took one) or after a long idle found it short and
// parsed its document about 35 ms later (docs/visit.md, "A browser's first page").
const [limitMs, done] = [arguments[0], arguments[arguments.length - 1]];
(async () => {
  const started = Date.now();
  const enabled = Services.prefs.getBoolPref("dom.ipc.processPrelaunch.enabled", false);
  // Without Fission the pool keeps one (PreallocatedProcessManager).
  const fission = Services.appinfo.fissionAutostart;
  const wanted = !enabled ? 0 : fission ? Services.prefs.getIntPref("dom.ipc.processPrelaunch.fission.number", 1) : 1;
  let ready = 0;
  for (;;) {
    const info = await ChromeUtils.requestProcInfo();
    ready = info.children.filter(child => child.type === "preallocated").length;
    if (ready >= wanted || Date.now() - started >= limitMs) break;
    await new Promise(resolve => setTimeout(resolve, 25));
  }
  return { wanted, ready, ms: Date.now() - started };
})().then(done, e => done({ error: String(e) }));
