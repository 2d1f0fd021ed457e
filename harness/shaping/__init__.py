"""Link emulation: network profiles and the backends that apply them in the shaper namespace."""
