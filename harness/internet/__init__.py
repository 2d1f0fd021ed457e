"""Internet mode: a client namespace routed to the real Internet through a shaper namespace and the host."""
