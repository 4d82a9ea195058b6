// systemc_traffic.cpp — kernbench's `traffic` pattern in SystemC 2.3, the
// reference for the embedded daemon's speed (bench/sync_bench.c runs both
// side by side and prints the ratio).
//
// N components, each an SC_THREAD that wait()s on its own sc_event once per
// delivered message. Each starts `tokens` tokens; a token hops to a random
// other component after a random processing delay (0..500 ps) plus a random
// link latency (1000..5000 ps), as workloads/traffic.c does. A component
// keeps its incoming messages in a mailbox ordered by time, and its event is
// notified for the earliest (an sc_event keeps only its earliest pending
// notification, which is exactly that). Prints one line:
//   systemc_traffic components=N messages=M resumes=R seconds=S rate=M/S
// Usage: systemc_traffic [components] [messages] [tokens]
#include <systemc.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <vector>

namespace {

uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

struct message {
	uint64_t t;   // delivery time, ps
	uint64_t seq; // ties broken by send order, as kernbench's key does
	uint32_t hops_left;
	uint64_t value;
	bool operator>(const message &o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct shared {
	uint32_t n;
	uint32_t tokens;
	uint32_t hops;
	std::vector<uint64_t> latency; // n x n, ps
	uint64_t seq = 0;
	uint64_t delivered = 0;
	uint64_t resumes = 0;
	uint64_t digest = 0;
};

SC_MODULE(component)
{
	sc_event wake;
	std::priority_queue<message, std::vector<message>, std::greater<message>> box;
	std::vector<component *> *all = nullptr;
	shared *sh = nullptr;
	uint32_t id = 0;
	uint64_t rng = 0;

	SC_CTOR(component) { SC_THREAD(run); }

	void post(const message &m, uint64_t now)
	{
		box.push(m);
		wake.notify(sc_time((double)(m.t - now), SC_PS));
	}

	void hop(uint64_t now, uint32_t hops_left, uint64_t value)
	{
		uint32_t dst = (uint32_t)(splitmix64(&rng) % (sh->n - 1));
		uint64_t delay = splitmix64(&rng) % 501;

		dst += dst >= id;
		(*all)[dst]->post({ now + delay + sh->latency[id * sh->n + dst], sh->seq++, hops_left,
				    value },
				  now);
	}

	void run()
	{
		for (uint32_t i = 0; i < sh->tokens; i++) // token starts: not counted
			post({ splitmix64(&rng) % 1000, sh->seq++, sh->hops, i }, 0);
		for (;;) {
			wait(wake);
			sh->resumes++;
			uint64_t now = sc_time_stamp().value();

			while (!box.empty() && box.top().t == now) {
				message m = box.top();

				box.pop();
				if (m.hops_left != sh->hops)
					sh->delivered++;
				sh->digest = (sh->digest ^ m.value ^ now) * 0x100000001b3ULL;
				if (m.hops_left)
					hop(now, m.hops_left - 1, m.value * 31 + now);
			}
			if (!box.empty())
				wake.notify(sc_time((double)(box.top().t - now), SC_PS));
		}
	}
};

} // namespace

int sc_main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], nullptr, 10) : 16;
	uint64_t messages = argc > 2 ? strtoull(argv[2], nullptr, 10) : 2000000;
	uint32_t tokens = argc > 3 ? (uint32_t)strtoul(argv[3], nullptr, 10) : 1;
	shared sh;
	std::vector<component *> all;
	uint64_t rng = 1;

	if (n < 2 || !tokens) {
		fprintf(stderr, "systemc_traffic: need at least 2 components and 1 token\n");
		return 2;
	}
	sc_set_time_resolution(1, SC_PS);
	sc_report_handler::set_actions(SC_INFO, SC_DO_NOTHING);
	sh.n = n;
	sh.tokens = tokens;
	sh.hops = (uint32_t)(messages / ((uint64_t)n * tokens));
	sh.hops = sh.hops ? sh.hops : 1;
	sh.latency.resize((size_t)n * n);
	for (auto &l : sh.latency)
		l = 1000 + splitmix64(&rng) % 4001;
	for (uint32_t i = 0; i < n; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%03u", i);
		all.push_back(new component(name));
		all.back()->all = &all;
		all.back()->sh = &sh;
		all.back()->id = i;
		all.back()->rng = 0x5851f42d4c957f2dULL * (i + 1);
	}
	auto start = std::chrono::steady_clock::now();
	sc_start();
	double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

	printf("systemc_traffic components=%u messages=%llu resumes=%llu seconds=%.6f rate=%.0f"
	       " digest=%016llx\n",
	       n, (unsigned long long)sh.delivered, (unsigned long long)sh.resumes, s,
	       (double)sh.delivered / s, (unsigned long long)sh.digest);
	for (auto *c : all)
		delete c;
	return 0;
}
