"""Run under horovodrun -np 2 by test_trainer_evaluation.py: each rank scores its shard of ../shared/cases/16,
predictions are pooled with trainer.evaluation.pool (hvd.allgather), rank 0 writes the AUROCs to argv[2]."""
import csv
import json
import sys

import numpy as np

from trainer import compat, evaluation

hvd = compat.import_horovod()
hvd.init()
rows = list(csv.DictReader(open(sys.argv[1])))
mine = [i for i, r in enumerate(rows) if int(r["rank"]) == hvd.rank()]
labels = np.array([[int(r["label"])] for r in rows])
scores = np.array([[float(r["score"])] for r in rows], dtype=np.float32)
own = evaluation.auroc_per_class(labels[mine], scores[mine])[0]
per_rank = compat.allgather(np.array([own]), "per_rank_auroc")
idx, pooled_scores = evaluation.pool(np.array(mine, np.int64), scores[mine], "case16")
# uneven shards: rank 0 three rows, rank 1 five
uneven = list(range(3)) if hvd.rank() == 0 else list(range(3, 8))
u_idx, u_scores = evaluation.pool(np.array(uneven, np.int64), scores[uneven], "uneven")
# a rank without rows (fewer validation rows than ranks): predict_shard(None) gives empty arrays
if hvd.rank() == 0:
    e_idx, e_scores = np.arange(8, dtype=np.int64), scores
else:
    e_idx, e_scores = evaluation.predict_shard(None, None)
e_idx, e_scores = evaluation.pool(e_idx, e_scores[:, :1], "empty")
if hvd.rank() == 0:
    idx, pooled_scores, missing = evaluation.order_rows(idx, pooled_scores, len(rows))
    u_idx, u_scores, u_missing = evaluation.order_rows(u_idx, u_scores, len(rows))
    json.dump({"per_rank": per_rank.tolist(), "mean_of_ranks": float(per_rank.mean()),
               "pooled": evaluation.auroc_per_class(labels[idx], pooled_scores)[0], "missing": missing.tolist(),
               "rows": idx.tolist(), "uneven_rows": u_idx.tolist(), "uneven_missing": u_missing.tolist(),
               "uneven_same_scores": bool((u_scores == scores).all()), "empty_rows": e_idx.tolist()},
              open(sys.argv[2], "w"))
