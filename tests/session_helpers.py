"""Driving a netcore.session.Session through a DAG of transfers, call by call, as a simulator
that uses it as its network backend would (tests of the session against batch runs)."""
import pytest


# the engines the session tests run on, and a skip where the packet engine is not built
ENGINES = [("flow", {}), ("flow", {"transport": "tcp"}),
           pytest.param("packet", {"transport": "tcp"}, id="packet-tcp")]


def _has_packet():
    try:
        import netcore.packet.incremental  # noqa: F401
        from netcore import _packet  # noqa: F401
    except ImportError:
        return False
    return True


def _skip_unavailable(engine):
    if engine == "packet" and not _has_packet():
        pytest.skip("packet engine (incremental driver) not built")


def drive(ses, src, dst, size, start, deps, stops=()):
    """Issue transfer i from its last parent's on_done (or a timed callback for its start);
    with ``stops``, advance by run_until to each (querying the session's state there) before
    the final run(). Returns the session ids by transfer."""
    n = len(src)
    waiting = [len(d) for d in deps]
    children = [[i for i in range(n) if j in deps[i]] for j in range(n)]
    ids = {}

    def launch(i):
        def go():
            ids[i] = ses.send(int(src[i]), int(dst[i]), int(size[i]), flow_key=i,
                              on_done=lambda _tid: done(i))
        if start[i] > ses.now():
            ses.schedule_at(float(start[i]), go)  # exactly there (a delay may miss by an ulp)
        else:
            go()

    def done(j):
        for c in children[j]:
            waiting[c] -= 1
            if waiting[c] == 0:
                launch(c)

    for i in range(n):
        if not waiting[i]:
            launch(i)
    for t in stops:
        if t >= ses.now():
            ses.run_until(t)
            assert ses.now() == t
            ses.result(), ses.pending(), ses.tag(0)  # looking changes nothing
    ses.run()
    return ids
