#!/usr/bin/env bash
# Run a build step trusting the CA bundle passed as the build secret `ca`, if any:
# pip, cargo and Go each read their own variable. Without the secret, the image's
# own trust store is used, as on any host with a direct route to the registries.
set -euo pipefail
if [ -s /run/secrets/ca ]; then
  export SSL_CERT_FILE=/run/secrets/ca PIP_CERT=/run/secrets/ca CARGO_HTTP_CAINFO=/run/secrets/ca
fi
exec "$@"
