out=${out_q}
scontrol show hostnames "$$SLURM_JOB_NODELIST" > "$$out/hosts.txt"
${gpu_query} > "$$out/nvidia-smi.csv" 2>/dev/null || true
cat > "$$out/record.json" <<'CHEXSTACK_RECORD'
${record_json}
CHEXSTACK_RECORD
