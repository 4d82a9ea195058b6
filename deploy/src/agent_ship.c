/* agent_ship.c — the agent's results (agent_state.h): at SHUTDOWN its
 * daemons' BYEs, its output files shipped in FilePart pieces credited by
 * the coordinator's FileAck (ADR 0050), its BYE with every report and the
 * list of files, and what the coordinator never confirmed named; the
 * staging folder removed.
 *
 * May use: agent_state.h, launch (kb_local), tidy, the runtime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent_state.h"
#include "launch.h"
#include "stops.h"
#include "tidy.h"
#include "rt/buf.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/wire.h"

/* ---------------------------------------------------------------- files */

/* Waits until the coordinator confirmed all but `slack` of the pieces
 * sent (and our BYE too, with `bye`). Bounded by the coordinator's
 * liveness, not by a clock: its heartbeats come from the loop that takes
 * the pieces, so while they come (RT_COORD_SILENCE_MS) and its connection
 * stays open, it is alive and reading; a stop signal here ends the wait. */
static enum rt_err wait_acks(struct agent *a, uint64_t slack, bool bye)
{
	while (a->sent_parts - a->acked_parts > slack || (bye && !a->bye_acked)) {
		Kb__Sync *got = NULL;
		enum rt_err err = kb_agent_recv_up(a, WAIT_SLICE_MS, &got);

		bool heard = got != NULL;

		if (!err && got)
			err = kb_agent_take_busy_frame(a, got);
		rt_wire_free_sync(got);
		/* a frame came: the coordinator is there. Its last frames (the
		 * BYE's ack) may be read after its connection closed, so only
		 * a wait that brought nothing looks at the connection */
		if (!err && !heard)
			err = kb_agent_beat_up(a);
		if (!err)
			err = kb_agent_stop_signal_pending(a);
		if (err)
			return err;
	}
	return RT_EOK;
}

/* One FilePart frame, once the window has room for it. */
static enum rt_err send_piece(struct agent *a, struct shipped *f, Kb__Sync *sync)
{
	enum rt_err err = wait_acks(a, FILE_WINDOW - 1, false);

	if (!err)
		err = kb_agent_send_up(a, sync);
	if (err)
		return err;
	a->sent_parts++;
	f->parts++;
	f->bytes += sync->file_part->data.len;
	f->end = a->sent_parts;
	return RT_EOK;
}

/* A new entry in the list of shipped files (NULL: out of memory). */
static struct shipped *note_shipped(struct agent *a, const char *path)
{
	struct shipped *f;

	if (a->n_files == a->cap_files) {
		size_t cap = a->cap_files ? 2 * a->cap_files : 32;
		struct shipped *grown = realloc(a->files, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		a->files = grown;
		a->cap_files = cap;
	}
	f = &a->files[a->n_files++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

/* Sends the data of one file (holes skipped: the coordinator ORs pieces
 * into a file of the same size), in credited pieces. */
static enum rt_err ship_file(struct agent *a, int dirfd, const char *name, const char *path)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__FilePart part = KB__FILE_PART__INIT;
	struct stat st;
	struct shipped *f;
	uint8_t *buf = NULL;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	off_t at = 0;
	enum rt_err err = RT_EOK;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return RT_EOK; /* not a regular file of ours: nothing to send */
	}
	buf = malloc(FILE_PIECE);
	f = note_shipped(a, path);
	if (!buf || !f)
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	part.path = (char *)path;
	part.size = (uint64_t)st.st_size;
	sync.body_case = KB__SYNC__BODY_FILE_PART;
	sync.file_part = &part;
	/* one piece, maybe empty, says the file's size */
	part.offset = 0;
	part.data.len = 0;
	if (!err)
		err = send_piece(a, f, &sync);
	while (!err && at < st.st_size) {
		off_t data = lseek(fd, at, SEEK_DATA), hole;
		ssize_t n;

		if (data < 0)
			break; /* only a hole is left */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			hole = st.st_size;
		n = pread(fd, buf, (size_t)(hole - data < FILE_PIECE ? hole - data : FILE_PIECE), data);
		if (n <= 0) {
			err = rt_fail(RT_EIO, "%s: cannot read %s: %s", a->label, path, strerror(errno));
			break;
		}
		part.offset = (uint64_t)data;
		part.data.data = buf;
		part.data.len = (size_t)n;
		err = send_piece(a, f, &sync);
		at = data + n;
		if (!err)
			err = kb_agent_keep_alive(a);
	}
	if (!err)
		f->whole = true;
	free(buf);
	close(fd);
	return err;
}

/* Every output file of this host (top level and .parts), then removes it. */
static enum rt_err ship_dir(struct agent *a, const char *sub)
{
	char dir[RT_PATH_MAX + 32], path[300];
	int fd;
	DIR *d;
	struct dirent *e;
	enum rt_err err = RT_EOK;

	snprintf(dir, sizeof(dir), "%s%s%s", a->staging, sub[0] ? "/" : "", sub);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return RT_EOK;
	}
	while (!err && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s%s%s", sub, sub[0] ? "/" : "", e->d_name);
		if (!rt_wire_check_part_path(path))
			err = ship_file(a, dirfd(d), e->d_name, path);
		kb_remove_owned(dirfd(d), e->d_name, false);
	}
	closedir(d);
	return err;
}

/* This host's output folder and all in it, by the launcher's rules
 * (tidy.h: never through a link, only what is ours); `forget` once this
 * host's daemons are gone (before, a failed host removes it early and
 * again after them: an engine that stopped it may SIGKILL it a second
 * later, mpirun does). */
void kb_agent_remove_staging(struct agent *a, bool forget)
{
	int tmp;

	if (!a->staging[0])
		return;
	tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tmp >= 0) {
		kb_remove_owned(tmp, a->staging + strlen("/tmp/"), true);
		close(tmp);
	}
	if (!forget)
		return;
	a->staging[0] = '\0';
	kb_guard_staging(NULL);
}

/* `err` (the coordinator gone, a signal, ...) with what the coordinator
 * never confirmed: those results of this host are lost (ADR 0050). */
static enum rt_err name_unconfirmed(struct agent *a, enum rt_err err, bool all_sent)
{
	struct rt_buf line;
	size_t shown = 0, more = 0;

	rt_buf_init(&line);
	rt_buf_printf(&line, "%s; the coordinator did not confirm ", rt_last_error());
	for (size_t k = 0; k < a->n_files; k++) {
		const struct shipped *f = &a->files[k];

		if (f->whole && f->end <= a->acked_parts)
			continue;
		if (shown == 8) {
			more++;
			continue;
		}
		rt_buf_printf(&line, "%s%s", shown++ ? ", " : "", f->path);
	}
	if (more)
		rt_buf_printf(&line, " and %zu more file%s", more, more > 1 ? "s" : "");
	if (!all_sent)
		rt_buf_printf(&line, "%sthe files not yet sent", shown ? ", " : "");
	rt_buf_printf(&line, "%sthis host's BYE: its results are lost",
		      shown || !all_sent ? " nor " : "");
	err = rt_fail(err, "%s", line.data ? line.data : "out of memory");
	rt_buf_release(&line);
	return err;
}

/* A test hook (tests/integration/test_bye_check.c): KB_TEST_BYE=bytes
 * claims one byte more of the first file than was sent, =drop leaves the
 * last file out, so the coordinator's check of the list can be seen to
 * fail the run and this agent to exit 1 naming what was not confirmed. */
static void lie_in_bye(Kb__Bye *bye)
{
	const char *how = getenv("KB_TEST_BYE");

	if (!how || !bye->n_files)
		return;
	if (!strcmp(how, "bytes"))
		bye->files[0]->bytes++;
	else if (!strcmp(how, "drop"))
		bye->n_files--;
}

/* The BYE's list of every file shipped (caller frees bye->files[0] and
 * bye->files). */
static enum rt_err list_shipped(struct agent *a, Kb__Bye *bye)
{
	Kb__FileSent *sent = calloc(a->n_files ? a->n_files : 1, sizeof(*sent));

	bye->files = calloc(a->n_files ? a->n_files : 1, sizeof(*bye->files));
	if (!sent || !bye->files) {
		free(sent);
		free(bye->files);
		bye->files = NULL;
		return rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	}
	for (size_t k = 0; k < a->n_files; k++) {
		kb__file_sent__init(&sent[k]);
		sent[k].path = a->files[k].path;
		sent[k].parts = a->files[k].parts;
		sent[k].bytes = a->files[k].bytes;
		bye->files[k] = &sent[k];
	}
	bye->n_files = a->n_files;
	lie_in_bye(bye);
	return RT_EOK;
}

/* Outputs written and shipped, then BYE with this host's reports and the
 * list of its files; ends when the coordinator confirmed it all. */
enum rt_err kb_agent_finish(struct agent *a)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Bye bye = KB__BYE__INIT;
	enum rt_err err, verdict;
	bool all_sent = false;

	/* finishing writes every output part, which takes seconds on a loaded
	 * machine: the keeper beats meanwhile, or the coordinator takes this
	 * host for dead (liveness, not wall-clock: ADR 0035) */
	kb_agent_lend_socket(a);
	err = kb_local_finish(a->local, &bye);
	verdict = kb_agent_take_socket(a);
	if (!err)
		err = verdict;
	if (err)
		return err;
	a->shipping = true;
	err = ship_dir(a, "");
	if (!err)
		err = ship_dir(a, RT_PARTS_DIR);
	all_sent = !err;
	if (!err)
		err = list_shipped(a, &bye);
	bye.daemon = a->host;
	sync.body_case = KB__SYNC__BODY_BYE;
	sync.bye = &bye;
	if (!err)
		err = kb_agent_send_up(a, &sync);
	if (bye.files) {
		free(bye.files[0]);
		free(bye.files);
	}
	bye.files = NULL;
	bye.n_files = 0;
	if (!err)
		err = wait_acks(a, 0, true);
	a->shipping = false;
	return err ? name_unconfirmed(a, err, all_sent) : RT_EOK;
}
