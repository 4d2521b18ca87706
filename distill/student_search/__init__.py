"""`search`: which student, of which size, distilled how, scores best on dev within a latency or size budget.

An Optuna study (the ``search`` extra) whose trials are `kd` runs (`Distiller.fit`) from the shared teacher-logit
cache, each into ``OUTPUT/trials/NNNN``. The first trials are each student's defaults (what ``kd --model X``
trains), enqueued, so the search can only add to them. Each epoch's dev score is reported to the trial, and a
pruner that compares a trial only with trials of its own student family (`FamilyPruner`) stops those that fall
behind; defaults are never pruned by it (a trial whose untrained student is far over a latency budget is pruned
before it trains, `trial.UNTRAINED_SLACK`). A finished trial's latency (a batch of `batch_size` dev examples at `threads`
torch threads) and size are measured on this machine with PyTorch and with ONNX Runtime (an ONNX export of the
trial's model): the faster runtime counts, and is recorded. Once the trials are done, the best few within the
budget (and the best default) are trained again with other seeds (enqueued trials too), and the one with the
best mean dev score is copied to ``OUTPUT/best`` (and exported to ``OUTPUT/best-onnx``): one seed's dev score
varies as much as the differences a search chases. Every trial's settings and scores go to ``trials.json``, a
table (``trials.md``) and a plot of dev score against latency and size with the Pareto front and the default
students (``trials.png``). A time budget counts every trial's seconds in the study (`spent_seconds`).

The search space is data (`SearchSpace`): students with some of their config fields, the loss's settings
(`TeacherStudentDistill`), the training settings (`TrainSettings`) and the Distiller's (`augment`,
`unlabeled_ratio`, `teacher_embeddings`); a field is checked against the class it sets, so a newly registered
student's fields can be searched without an edit here. `DEFAULT_SPACES` holds a space per task.

The study lives in a database (``sqlite:///OUTPUT/study.db`` unless `storage` names another): the same call
resumes an interrupted search (`trials` is the total wanted), and several processes, or machines, pointing at one
storage share the work, one trial per process at a time. A trial interrupted by Ctrl-C or SIGTERM is failed and
queued again with its settings, and its run continues from its last finished epoch; a process killed outright
leaves its trial running until its heartbeat goes stale (`GRACE_SECONDS`), then it is queued again the same way
(at once where that process was of this machine and is gone).

One module a part (a package named for the search, since `distill.search` is the function): `distill.student_search.space` (what is searched), `distill.student_search.trial` (one kd run, pruned, timed),
`distill.student_search.study` (the study's storage, scheduling and `search` itself) and `distill.student_search.report` (the
records, the choice and the files).
"""

from distill.student_search.report import choose_best, pareto_front
from distill.student_search.space import DEFAULT_SPACES, SearchSpace, load_space, parse_space
from distill.student_search.study import SearchResult, SearchSettings, search
from distill.student_search.trial import Budget, FamilyPruner, measure

__all__ = ["DEFAULT_SPACES", "Budget", "FamilyPruner", "SearchResult", "SearchSpace", "choose_best", "load_space",
           "measure", "pareto_front", "parse_space", "search", "SearchSettings"]
