// Firefox, chrome context: trust the CA of the warm-up server (harness/browser/warmup.py) to issue server
// certificates, in the running browser's certificate database; arguments[0] is the CA, DER in base64.
const db = Cc["@mozilla.org/security/x509certdb;1"].getService(Ci.nsIX509CertDB);
db.addCertFromBase64(arguments[0], "C,,");
return true;
