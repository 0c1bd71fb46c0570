# The bundle must still hold the image this script was rendered for (its record: images.oci.RECORD).
if ! grep -qF -- ${digest_line} ${record}; then
  printf 'chexstack: error: the OCI bundle %s no longer records %s (%s): make it again (invoke build --stack %s --bundle DIR) and render again\n' \
    ${bundle} ${digest} ${image} ${stack} >&2
  exit 2
fi
