//! `nena bench policy`: per-packet cost of each selector and actor (`drop` aside: it ends the packet), on frames it acts on and
//! on frames it skips, and of chains of 2, 4 and 8 links that all act, with
//! BPF_PROG_TEST_RUN; every figure also as a ratio to the dispatcher measured in the same run.
//!
//! Method. Two ways of timing a figure, both as (with the chain) minus (without it), so a
//! figure is what adding the link(s) costs: the link's work, the counters, for an actor the
//! chain lookup, the context and its tail call.
//! - `batch`: one BPF_PROG_TEST_RUN of the hook's dispatcher with `repeat` runs on one
//!   frame; the kernel reports the mean time per run. Pairs of batches (with, without), the
//!   median of the differences. Only for frames the links treat alike on every run: the
//!   counters are read after each batch and must show that every link acted (a selector:
//!   matched) on every run, or that the link skipped on every run, as the figure says.
//! - `single`: for links that rewrite the frame they act on (`rate_limit`, `set_backup`,
//!   `blk_subflow`, `add_subflow`, and the chains holding them), the kernel's repeat would
//!   run them again on the frame they changed, where they have nothing left to do. So:
//!   single runs, each on the original frame, an untimed one then a timed one (so programs,
//!   chain and maps are warm as in a stream of packets); pairs (with, without), the median of
//!   the differences; both runs with the chain checked to have acted (every link counted a
//!   hit, the frame came out changed). The per-flow state an actor keeps is set up so that
//!   it acts again: `add_subflow`'s kept announcement is blocked anew before each pair, and
//!   `set_backup` (which adds its MP_PRIO once per subflow) gets a new subflow per run, whose
//!   SYN goes through the hook first (untimed, no chain), as a subflow's does.
//!
//! Pairs are taken in rounds (one pair, or a few single pairs, of every figure at both hooks
//! per round), so each figure's samples spread over the whole run: the host's slow spells
//! last seconds. The dispatcher figure is the median of every batch without a chain on the
//! DSS ACK; each figure's ratio is its ns over that, at the same hook. Nothing is clamped: a
//! negative difference (the link costs less than the run-to-run noise) is reported as it is
//! and flagged `noise`.
//!
//! Files: `links` (the links and chains, what the bench knows of each), `frames` (the
//! frames), `measure` (one pair of runs on the test bed, the counters checked), `run` (the
//! rounds, the report, `compare`), `report` (the report's types, the targets and the check),
//! `steps` (the acting figures on several builds at once: where an actor's time goes).

mod frames;
mod links;
mod measure;
mod report;
mod run;
mod steps;

pub use links::{chains, BenchLink, Frame, Kind, Link, Method};
pub use report::{check, limit_for, limits, BenchEntry, BenchReport, Figure, Measure, TargetCheck};
pub use run::{compare, run};
pub use steps::{steps, StepRow};
