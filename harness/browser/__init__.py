"""Firefox driven through geckodriver: preferences, profiles, the session and its HAR."""
