# Render-time MPI check on ${render_host}: ${mpi_reason}.
# Checked again here, where the job runs (another MPI module may be loaded):
image_mpi=${image_mpi}
host_mpi="$$(mpirun --version 2>&1 | head -n 1)"
case "$$host_mpi" in
  *${mpi_pattern}*) ;;
  *) echo "chexstack: host mpirun is '$$host_mpi' but the image has $$image_mpi; the hybrid model needs the same major.minor" >&2
     exit 1 ;;
esac
