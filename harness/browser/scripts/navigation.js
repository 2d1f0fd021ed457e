// The page: its document URI, title and Navigation Timing entry. In TRR-only mode Firefox's error page
// (about:neterror) names the kind of TRR failure (its skip reason, grouped) as the localisation id of
// #trrOnlyDescription: a fixed identifier, not prose.
const n = performance.getEntriesByType('navigation')[0];
const trr = document.documentURI.startsWith('about:neterror') ? document.getElementById('trrOnlyDescription') : null;
return {uri: document.documentURI, title: document.title,
        timing: n ? n.toJSON() : null, trr: trr ? trr.getAttribute('data-l10n-id') : null};
