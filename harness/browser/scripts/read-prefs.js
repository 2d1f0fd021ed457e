// Firefox, chrome context: the values the running browser holds for the preferences named in
// arguments[0] (null: not set anywhere).
const out = {};
for (const name of arguments[0]) {
  const type = Services.prefs.getPrefType(name);
  out[name] = type == Services.prefs.PREF_BOOL ? Services.prefs.getBoolPref(name)
            : type == Services.prefs.PREF_INT ? Services.prefs.getIntPref(name)
            : type == Services.prefs.PREF_STRING ? Services.prefs.getStringPref(name) : null;
}
return out;
