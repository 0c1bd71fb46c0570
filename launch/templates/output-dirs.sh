# pyxis/enroot and singularity --bind fail when a mount source does not exist: create the output folder(s) first.
mkdir -p -- ${dirs}
