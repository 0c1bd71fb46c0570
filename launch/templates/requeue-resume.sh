# --requeue: Slurm may restart this job (scontrol requeue, a node failure). A restart continues from the last
# committed checkpoint, so no epoch is lost or repeated; one before the first commit starts afresh.
resume=
if [ "$${SLURM_RESTART_COUNT:-0}" -gt 0 ] && [ -e ${state} ]; then
    resume=--resume
    echo "chexstack: Slurm restart $${SLURM_RESTART_COUNT}: continuing from the last committed checkpoint" ${state}
fi
