// Firefox, chrome context: set the preferences in arguments[0] ({name: value}) and put back those in
// arguments[1] ({name: value, or null for "not set"}), in a browser that serves many visits, each with its
// arm's preferences. Returns the values the names of arguments[0] had before, null where unset.
const before = {};
const read = name => {
  const type = Services.prefs.getPrefType(name);
  return type == Services.prefs.PREF_BOOL ? Services.prefs.getBoolPref(name)
       : type == Services.prefs.PREF_INT ? Services.prefs.getIntPref(name)
       : type == Services.prefs.PREF_STRING ? Services.prefs.getStringPref(name) : null;
};
const write = (name, value) => {
  if (value === null) Services.prefs.clearUserPref(name);
  else if (typeof value == "boolean") Services.prefs.setBoolPref(name, value);
  else if (typeof value == "number") Services.prefs.setIntPref(name, value);
  else Services.prefs.setStringPref(name, value);
};
for (const [name, value] of Object.entries(arguments[1])) write(name, value);
for (const [name, value] of Object.entries(arguments[0])) { before[name] = read(name); write(name, value); }
return before;
