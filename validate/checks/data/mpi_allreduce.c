/* chexstack's MPI launch test: every rank joins MPI_COMM_WORLD, allreduces rank+1, prints one line.
 * Expected: N lines "chexstack-mpi rank R size N sum N(N+1)/2 host H". */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, mine, sum;
    char host[256] = "?";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host - 1);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("chexstack-mpi rank %d size %d sum %d host %s\n", rank, size, sum, host);
    MPI_Finalize();
    return 0;
}
