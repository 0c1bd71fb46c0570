# This job's bundle: the image's config with the run's mounts, its rootfs the image bundle's; removed at the end.
job_bundle=${folder}/oci-bundle-$${SLURM_JOB_ID}
mkdir -p -- "$$job_bundle"
trap 'rm -rf -- "$$job_bundle"' EXIT
ln -sfn -- ${rootfs} "$$job_bundle/rootfs"
cat > "$$job_bundle/config.json" <<'CHEXSTACK_OCI_CONFIG'
${config}
CHEXSTACK_OCI_CONFIG
