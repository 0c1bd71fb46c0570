# The SIF file's SHA-256 for every rank's run record (a SIF cannot hold its own digest); mpirun passes it on.
${name}="$$(sha256sum -- ${image} | cut -d' ' -f1)"
export ${name}
