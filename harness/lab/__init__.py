"""The offline testbed: namespaces, a private CA, resolvers and a synthetic web."""
