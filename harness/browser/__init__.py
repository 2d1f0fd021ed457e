"""The browser a visit runs in.

`Browser` (base.py) is what a visit needs from any browser, `make_browser`
(registry.py) picks one by name. Firefox is firefox.py, driven through
geckodriver: session.py (one session, its watchdog), template.py (the warmed
profile every visit copies), prefs.py (profiles/firefox/). Shared by every
browser: account.py (the unprivileged user), bidi.py (the WebDriver BiDi event
log), har.py (the HAR 1.2 recorder), scripts/ (the JavaScript run in the browser).
"""
