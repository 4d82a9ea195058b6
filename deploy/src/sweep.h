/* sweep.h — `kernbench sweep`: many points of one workload, each a
 * `kernbench run` in a folder named by the hash of its resolved
 * configuration, run in parallel on this machine (or one share per task of
 * a Slurm job array or an mpirun job), gathered into results.csv and a
 * plot. docs/exploring.md is the user's guide; ADR 0045 the design.
 *
 *   sweep.c          the command line and the run
 *   sweep_points.c   each point's command line, hash and folder
 *   sweep_spec.c     axes, value lists, the YAML sweep file
 *   sweep_run.c      the pool of point processes and the progress line
 *   sweep_results.c  results.csv, sweep.json and the plot */
#ifndef KB_SWEEP_H
#define KB_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rt/err.h"
#include "rt/job.h"
#include "sweep_spec.h"

/* One point of a sweep. */
struct kb_point {
	size_t index;      /* in sweep order */
	char hash[17];     /* of its resolved configuration: its folder name */
	char **argv;       /* `run ...` for it (owned; NULL-terminated) */
	size_t *value;     /* value index of each axis (owned) */
	size_t first;      /* the first point with the same hash (itself if none) */
	bool mine;         /* this task runs it */
	bool done;         /* its folder holds a finished run's summary.json */
	bool failed;
	int status;        /* its run's exit status */
	char error[512];   /* its run's error line ("" none) */
	double wall_s;     /* wall time of its run here (0: not run now) */
};

struct kb_sweep {
	struct kb_sweep_spec spec;
	char out[1024];         /* the sweep folder */
	unsigned jobs;          /* points run at once */
	enum rt_progress progress;
	bool quiet;
	bool plot;
	bool plotted;           /* OUT/sweep.png was drawn from results.csv */
	pid_t plotter;          /* the plot script, started early (0: none) */
	int plotter_fd;         /* ... its stdin: "draw" when results.csv is done */
	uint32_t task, tasks;   /* this process runs points p with p % tasks == task */
	const char *task_source;/* where the task index came from */
	struct kb_point *points;
	size_t n_points;
	char exe[4096];         /* this binary, run for each point */
};

/* Makes s->points from the spec: each resolved by the run parser (a
 * usage error names the point), hashed, and marked done when its folder
 * holds a finished run; and the folder OUT/points. */
enum rt_err kb_sweep_make_points(struct kb_sweep *s);
enum rt_err kb_sweep_make_dirs(const struct kb_sweep *s);
void kb_sweep_release(struct kb_sweep *s);
/* Runs every point of `s` that is this task's and not done, --jobs at a
 * time; fills each point's status. RT_EINTERRUPTED after Ctrl-C. */
enum rt_err kb_sweep_run(struct kb_sweep *s);
/* Starts the plot script before the points run, so its imports (most of
 * its time) overlap them; it draws when kb_sweep_results says so. */
void kb_sweep_plot_early(struct kb_sweep *s);
/* Writes results.csv and sweep.json in the sweep folder (when every point
 * is done or failed), then the plot; *complete says whether all were.
 * Ends an early plot script either way. */
enum rt_err kb_sweep_results(struct kb_sweep *s, bool *complete);
/* The point folder OUT/points/HASH into `path`. */
void kb_sweep_point_dir(const struct kb_sweep *s, const struct kb_point *p, char *path,
			size_t cap);

/* `kernbench sweep ...` (argv[0] is "sweep"); the exit status. */
int kb_sweep_main(int argc, char **argv);

#endif
