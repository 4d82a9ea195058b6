/* keys.c — the run's CURVE keys: generate, write (0600, never over an
 * existing file or through a symlink), and parse the key file. The file
 * is four "name Z85" lines; anything else is refused with the line number. */
#include "rt/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "rt/buf.h"

#define KEY_FILE_MAX 4096

static const char *const key_names[4] = { "server-public", "server-secret", "client-public",
					  "client-secret" };

static char *key_slot(struct rt_keys *k, int i)
{
	char *slots[4] = { k->server_public, k->server_secret, k->client_public,
			   k->client_secret };
	return slots[i];
}

enum rt_err rt_keys_check_curve(void)
{
	if (!zmq_has("curve"))
		return rt_fail(RT_ETRANSPORT, "this ZeroMQ was built without CURVE (libsodium); "
			       "keys cannot be used");
	return RT_EOK;
}

enum rt_err rt_keys_generate(struct rt_keys *k)
{
	enum rt_err err = rt_keys_check_curve();

	memset(k, 0, sizeof(*k));
	if (err)
		return err;
	if (zmq_curve_keypair(k->server_public, k->server_secret) ||
	    zmq_curve_keypair(k->client_public, k->client_secret))
		return rt_fail(RT_ETRANSPORT, "cannot generate CURVE keys: %s",
			       zmq_strerror(zmq_errno()));
	k->on = true;
	return RT_EOK;
}

/* The file's lines; the server secret only if the keys have it. */
static int key_text(const struct rt_keys *k, char *text, size_t cap)
{
	int n = 0;

	for (int i = 0; i < 4; i++)
		if (key_slot((struct rt_keys *)k, i)[0])
			n += snprintf(text + n, cap - (size_t)n, "%s %s\n", key_names[i],
				      key_slot((struct rt_keys *)k, i));
	return n;
}

enum rt_err rt_keys_write(const struct rt_keys *k, const char *path)
{
	char text[512];
	int n = key_text(k, text, sizeof(text));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return rt_fail(RT_EIO, "keygen: cannot create '%s': %s%s", path, strerror(errno),
			       errno == EEXIST ? " (refusing to overwrite a key file)" : "");
	if (fchmod(fd, 0600) || write(fd, text, (size_t)n) != n || fsync(fd)) {
		int e = errno;
		close(fd);
		unlink(path);
		return rt_fail(RT_EIO, "keygen: cannot write '%s': %s", path, strerror(e));
	}
	close(fd);
	return RT_EOK;
}

/* A Z85 key: exactly 40 characters of the Z85 alphabet that decode. */
static bool valid_z85(const char *s, size_t n)
{
	uint8_t raw[32];
	char tmp[RT_KEY_Z85];

	if (n != RT_KEY_Z85 - 1)
		return false;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    ".-:+=^!/*?&<>()[]{}@%$#", tmp[i]) || !tmp[i])
			return false;
	return zmq_z85_decode(raw, tmp) != NULL;
}

static enum rt_err parse_line(const char *line, size_t n, const char *where, int lineno,
			      struct rt_keys *k, unsigned *seen)
{
	const char *sp = memchr(line, ' ', n);

	for (int i = 0; sp && i < 4; i++) {
		size_t nl = strlen(key_names[i]);
		if ((size_t)(sp - line) != nl || memcmp(line, key_names[i], nl))
			continue;
		if (*seen & (1u << i))
			return rt_fail(RT_ECONFIG, "%s:%d: '%s' given twice", where, lineno,
				       key_names[i]);
		if (!valid_z85(sp + 1, n - nl - 1))
			return rt_fail(RT_ECONFIG, "%s:%d: '%s' is not a 40-character Z85 key",
				       where, lineno, key_names[i]);
		memcpy(key_slot(k, i), sp + 1, RT_KEY_Z85 - 1);
		key_slot(k, i)[RT_KEY_Z85 - 1] = 0;
		*seen |= 1u << i;
		return RT_EOK;
	}
	return rt_fail(RT_ECONFIG, "%s:%d: expected 'NAME KEY' with NAME one of server-public, "
		       "server-secret, client-public, client-secret", where, lineno);
}

enum rt_err rt_keys_parse(const char *text, size_t len, const char *where, struct rt_keys *k)
{
	unsigned seen = 0;
	int lineno = 0;
	size_t at = 0;

	memset(k, 0, sizeof(*k));
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		enum rt_err err;

		lineno++;
		if (n && memchr(text + at, 0, n))
			return rt_fail(RT_ECONFIG, "%s:%d: NUL byte in key file", where, lineno);
		err = n ? parse_line(text + at, n, where, lineno, k, &seen) : RT_EOK;
		if (err) {
			memset(k, 0, sizeof(*k));
			return err;
		}
		at += n + 1;
	}
	/* the server secret is the coordinator's alone: an agent's file may
	 * leave it out (rt_keys_client_side) */
	for (int i = 0; i < 4; i++)
		if (!(seen & (1u << i)) && i != 1) {
			memset(k, 0, sizeof(*k));
			return rt_fail(RT_ECONFIG, "%s: missing '%s' (write the file with "
				       "`kernbench keygen --out FILE`)", where, key_names[i]);
		}
	k->on = true;
	return RT_EOK;
}

void rt_keys_client_side(const struct rt_keys *k, struct rt_keys *out)
{
	*out = *k;
	memset(out->server_secret, 0, sizeof(out->server_secret));
}

/* Who may read a key file: its owner only (mode 0600, 0400), or also
 * its group (0640, 0440: a Kubernetes Secret mounted with fsGroup, which a
 * non-root container reads through its group) when the owner is root or
 * this user — no one else could have handed it to us — and the folder it
 * is in cannot be written by others (no one swapped it in). */
static bool key_mode_ok(const char *path, const struct stat *st)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat ds;

	if (!(st->st_mode & 077))
		return true;
	if ((st->st_mode & 077) != 040 || (st->st_uid != 0 && st->st_uid != geteuid()))
		return false;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	return stat(dir, &ds) == 0 && !(ds.st_mode & S_IWOTH);
}

enum rt_err rt_keys_load(const char *path, struct rt_keys *k)
{
	char text[KEY_FILE_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (rt_keys_check_curve())
		return RT_ETRANSPORT;
	/* non-blocking: a FIFO planted as the key file must not hang */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rt_fail(RT_ECONFIG, "--keys '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !key_mode_ok(path, &st)) {
		close(fd);
		return rt_fail(RT_ECONFIG, "--keys '%s': not a regular file of mode 0600 or 0400, "
			       "or 0640/0440 owned by root or this user in a folder others cannot "
			       "write (others may read or replace the secret keys)", path);
	}
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 0 || n == (ssize_t)sizeof(text))
		return rt_fail(RT_ECONFIG, "--keys '%s': unreadable or larger than %d bytes", path,
			       KEY_FILE_MAX - 1);
	return rt_keys_parse(text, (size_t)n, path, k);
}

/* ------------------------------------------------------------ ZAP handler */

struct rt_zap {
	void *rep;
	pthread_t thread;
	atomic_bool stop;
	rt_zap_admit_fn admit;
	void *arg;
	void *owned; /* freed with the handler (rt_keys_serve's key) */
};

/* One ZAP request (RFC 27): version, id, domain, address, identity,
 * mechanism, credentials. Replies 200 only for CURVE with a key the
 * handler's admit function accepts, with the User-Id it gives. */
static void zap_answer(struct rt_zap *z)
{
	zmq_msg_t part[8];
	int n = 0, more = 1;
	char user[RT_ZAP_USER] = "";
	bool ok = false;

	while (more && n < 8) {
		zmq_msg_init(&part[n]);
		if (zmq_msg_recv(&part[n], z->rep, 0) < 0) {
			zmq_msg_close(&part[n]);
			break;
		}
		more = zmq_msg_more(&part[n]);
		n++;
	}
	while (more) { /* drain an over-long request */
		zmq_msg_t extra;
		zmq_msg_init(&extra);
		more = zmq_msg_recv(&extra, z->rep, 0) >= 0 && zmq_msg_more(&extra);
		zmq_msg_close(&extra);
	}
	if (n == 7 && zmq_msg_size(&part[5]) == 5 && !memcmp(zmq_msg_data(&part[5]), "CURVE", 5) &&
	    zmq_msg_size(&part[6]) == 32)
		ok = z->admit(z->arg, zmq_msg_data(&part[6]), user);
	if (n >= 2) {
		zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
		zmq_send(z->rep, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
		zmq_send(z->rep, ok ? "200" : "400", 3, ZMQ_SNDMORE);
		zmq_send(z->rep, ok ? "OK" : "key not admitted", ok ? 2 : 16, ZMQ_SNDMORE);
		zmq_send(z->rep, ok ? user : "", ok ? strlen(user) : 0, ZMQ_SNDMORE);
		zmq_send(z->rep, "", 0, 0);
	}
	for (int i = 0; i < n; i++)
		zmq_msg_close(&part[i]);
}

static void *zap_main(void *arg)
{
	struct rt_zap *z = arg;

	while (!atomic_load(&z->stop)) {
		zmq_pollitem_t it = { z->rep, 0, ZMQ_POLLIN, 0 };
		if (zmq_poll(&it, 1, 100) > 0)
			zap_answer(z);
	}
	return NULL;
}

enum rt_err rt_zap_start(void *zctx, rt_zap_admit_fn admit, void *arg, struct rt_zap **out)
{
	struct rt_zap *z = calloc(1, sizeof(*z));
	int zero = 0, failed;
	sigset_t all, old;

	*out = NULL;
	if (!z)
		return rt_fail(RT_ENOMEM, "no memory for the ZAP handler");
	z->admit = admit;
	z->arg = arg;
	atomic_init(&z->stop, false);
	z->rep = zmq_socket(zctx, ZMQ_REP);
	if (!z->rep || zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_bind(z->rep, "inproc://zeromq.zap.01")) {
		enum rt_err err = rt_fail(RT_ETRANSPORT, "cannot start the ZAP handler: %s",
					  zmq_strerror(zmq_errno()));
		if (z->rep)
			zmq_close(z->rep);
		free(z);
		return err;
	}
	/* signals stay with the process's other threads (a signalfd or handler) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	failed = pthread_create(&z->thread, NULL, zap_main, z);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (failed) {
		zmq_close(z->rep);
		free(z);
		return rt_fail(RT_ETRANSPORT, "cannot start the ZAP handler's thread");
	}
	*out = z;
	return RT_EOK;
}

/* The coordinator's handler: the key file's one client public key. */
struct client_key {
	uint8_t raw[32];
	atomic_bool logged; /* refusals are reported once per run */
};

static bool admit_client_key(void *arg, const uint8_t key[32], char user[RT_ZAP_USER])
{
	struct client_key *c = arg;

	(void)user;
	if (!memcmp(key, c->raw, 32))
		return true;
	if (!atomic_exchange(&c->logged, true))
		fprintf(stderr, "kernbench: refused a connection without the run's client key "
			"(reported once)\n");
	return false;
}

enum rt_err rt_keys_serve(const struct rt_keys *k, void *zctx, void *sock, struct rt_zap **out)
{
	struct client_key *c;
	enum rt_err err;
	int one = 1;

	*out = NULL;
	if (!k->server_secret[0])
		return rt_fail(RT_ECONFIG, "--keys: the file has no server-secret, which the "
			       "coordinator needs (give it the file `kernbench keygen` wrote)");
	if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->server_secret, RT_KEY_Z85) ||
	    zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "kernbench", 9))
		return rt_fail(RT_ETRANSPORT, "coordinator: cannot set up CURVE: %s",
			       zmq_strerror(zmq_errno()));
	c = calloc(1, sizeof(*c));
	if (!c)
		return rt_fail(RT_ENOMEM, "coordinator: no memory for the ZAP handler");
	zmq_z85_decode(c->raw, k->client_public);
	atomic_init(&c->logged, false);
	err = rt_zap_start(zctx, admit_client_key, c, out);
	if (err)
		free(c);
	else
		(*out)->owned = c;
	return err;
}

void rt_zap_destroy(struct rt_zap **zp)
{
	struct rt_zap *z = *zp;

	if (!z)
		return;
	atomic_store(&z->stop, true);
	pthread_join(z->thread, NULL);
	zmq_close(z->rep);
	free(z->owned);
	free(z);
	*zp = NULL;
}

enum rt_err rt_keys_client(const struct rt_keys *k, void *sock)
{
	if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, k->server_public, RT_KEY_Z85) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->client_public, RT_KEY_Z85) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->client_secret, RT_KEY_Z85))
		return rt_fail(RT_ETRANSPORT, "daemon: cannot set up CURVE: %s",
			       zmq_strerror(zmq_errno()));
	return RT_EOK;
}
