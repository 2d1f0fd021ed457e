// Firefox, chrome context, asynchronous: resolve arguments[0] through the browser's resolver (TRR in modes
// 2 and 3, else the system's), bypassing the cache, so the connection to the resolver is open before a
// navigation (a warm connection). Returns null on an answer, else the failure's status name.
const done = arguments[arguments.length - 1];
const flags = Ci.nsIDNSService.RESOLVE_BYPASS_CACHE;
const listener = { onLookupComplete(request, record, status) {
  done(Components.isSuccessCode(status) || status == Cr.NS_ERROR_UNKNOWN_HOST ? null : `status 0x${status.toString(16)}`);
} };
try {
  Services.dns.asyncResolve(arguments[0], Ci.nsIDNSService.RESOLVE_TYPE_DEFAULT, flags, null, listener,
                            Services.tm.mainThread, {});
} catch (e) { done(String(e)); }
