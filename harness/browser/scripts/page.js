// The page as it reports itself, read in one script (one WebDriver round trip): its document URI, title and
// Navigation Timing entry, and its paint timing in ms from navigation start.
// In TRR-only mode Firefox's error page (about:neterror) names the kind of TRR failure (its skip reason,
// grouped) as the localisation id of #trrOnlyDescription: a fixed identifier, not prose.
// First Contentful Paint from the paint entries; Largest Contentful Paint, whose entries are not kept in the
// timeline's buffer, from a buffered observer's takeRecords(): observe() queues the buffered entries
// synchronously, so the last candidate painted before collection is there at once (on 18 lab visits it equalled
// what a 100 ms wait for the observer's callback delivered, entry for entry).
const n = performance.getEntriesByType('navigation')[0];
const trr = document.documentURI.startsWith('about:neterror') ? document.getElementById('trrOnlyDescription') : null;
const paint = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
let lcp = null;
try {
  const observer = new PerformanceObserver(() => {});
  observer.observe({type: 'largest-contentful-paint', buffered: true});
  const entries = observer.takeRecords();
  observer.disconnect();
  lcp = entries.length ? entries[entries.length - 1].startTime : null;
} catch (e) { /* no LCP in this browser or page: null */ }
return {uri: document.documentURI, title: document.title,
        timing: n ? n.toJSON() : null, trr: trr ? trr.getAttribute('data-l10n-id') : null,
        paint: {fcp: paint ? paint.startTime : null, lcp: lcp}};
