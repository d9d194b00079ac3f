// netcosim's ns-3 driver, compiled at run time by cppyy (cppyy.cppdef) after `from ns import ns`.
//
// Python hands over flat arrays (topology, per-flow paths per routing epoch, schedule DAG,
// faults); everything that happens during the run is C++ inside ns-3's event loop:
//   * the fabric: one PointToPoint link per physical link, a drop-tail device queue of
//     `bufPkts` packets (PortQueue; with dctcp it marks CE from `ecnK` packets waiting), no
//     traffic-control qdisc (removed, so the buffer is exactly that); a host's devices hold
//     its own packets without limit (the packet engine's rule);
//   * routing: ns-3's own Ipv4StaticRouting with /32 host routes. Every transfer i owns two
//     addresses (a source address on its src host, a destination address on its dst host), so
//     the path the scenario's routing policy chose for *that* transfer is installed hop by hop
//     (data along the path, ACKs along the reversed path). This reproduces any single-path
//     policy exactly (shortest, dmodk, dor, ecmp, valiant), not only destination-based ones;
//   * transfers: one TCP connection each, opened when the node is released (Connect: SYN,
//     SYN-ACK, ACK, as a real bulk transfer and the packet engine's tcp do); the whole
//     transfer is handed to TCP at release, TCP holds it until the connection is established
//     and sends it right after the handshake's ACK; a transfer ends when its receiver has
//     read all its bytes;
//   * dependencies: a node is released (in an event of its own) when all its parents ended
//     and the clock reached its start time; COMPUTE/DELAY nodes end `duration` later;
//   * faults: degrade = device DataRate changed at the time; down = the link loses its queue
//     and every frame reaching its far end until it is up again; at each change of the live
//     links the flows the packet engine would re-route (Moving) get the path the Python side
//     computed over the alive links, hop by hop; a flow left without a path is stranded with
//     its descendants.
namespace netcosim_ns3 {
using namespace ns3;

class Driver;
static Driver* g_drv = nullptr;

// Every device's queue, with the packet engine's rules (docs/packet_engine.md, "Buffers" and
// "dctcp"). At a host (owner >= 0) the host's own packets (data, SYN and ACKs of the transfers
// it sends or receives) never drop and are never marked: they wait, as a sender back-pressured
// by its NIC. Every other packet (at a switch port, or forwarded by a torus host) drops when
// `limit` or more are waiting, as a drop-tail queue of that many packets; with ecnK > 0 (dctcp)
// it is marked CE when it joins a queue that already holds ecnK packets, if its sender made it
// ECN-capable (TcpDctcp makes every packet ECT(0): SYNs and pure ACKs too). A plain DropTail
// queue at a host dropped a sender's own slow-start overshoot, so a lone flow whose first link
// is its bottleneck lost hundreds of packets in ns-3 and none in the engine.
class PortQueue : public Queue<Packet>
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("netcosim_ns3::PortQueue")
                                .SetParent<Queue<Packet>>()
                                .SetGroupName("Network")
                                .AddConstructor<PortQueue>();
        return tid;
    }
    int owner = -1;      // the host whose device this queue is; -1 at a switch
    uint32_t limit = 0;  // waiting packets beyond which a packet not the owner's drops
    uint32_t ecnK = 0;   // waiting packets from which one joining is marked CE (0: never)
    uint64_t marks = 0;
    bool Enqueue(Ptr<Packet> item) override;
    // FIFO, as DropTailQueue
    Ptr<Packet> Dequeue() override { return DoDequeue(GetContainer().begin()); }
    Ptr<Packet> Remove() override { return DoRemove(GetContainer().begin()); }
    Ptr<const Packet> Peek() const override { return DoPeek(GetContainer().begin()); }
};

// ns-3's TcpDctcp with Linux's floor on a cut (dctcp_ssthresh in net/ipv4/tcp_dctcp.c keeps two
// segments; TcpDctcp::GetSsThresh has none, so a window cut below one segment waits for the RTO).
// Used when engine.dctcp_min_ssthresh_segments > 0; everything else is TcpDctcp's own.
class TcpDctcpFloor : public TcpDctcp
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("netcosim_ns3::TcpDctcpFloor")
                                .SetParent<TcpDctcp>()
                                .SetGroupName("Internet")
                                .AddConstructor<TcpDctcpFloor>();
        return tid;
    }
    inline static uint32_t floorSegments = 0;
    std::string GetName() const override { return "TcpDctcpFloor"; }
    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        return std::max<uint32_t>(floorSegments * tcb->m_segmentSize,
                                  TcpDctcp::GetSsThresh(tcb, bytesInFlight));
    }
    Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpDctcpFloor>(this); }
};

class Driver {
  public:
    // ---------------------------------------------------------------- fabric
    int nNodes = 0, nHosts = 0, nLinks = 0;
    std::vector<int> dsrc, ddst;                 // per directed link
    std::vector<Ptr<PointToPointNetDevice>> dev; // device at the directed link's source
    std::vector<uint32_t> ifIndex;               // its Ipv4 interface index
    std::vector<Ipv4Address> peerAddr;           // address at the other end (next hop)
    std::vector<double> nominalBps;              // bits/s
    std::vector<Ptr<Ipv4StaticRouting>> srt;     // per node
    std::vector<std::unordered_map<uint32_t, int>> ifLink; // per node: interface -> dlink
    // per directed link counters
    std::vector<double> txBytes, busyS;
    std::vector<uint64_t> drops, qMax, queueDrops;

    // ---------------------------------------------------------------- schedule
    int n = 0;
    std::vector<int8_t> kind;
    std::vector<int32_t> src, dst;
    std::vector<int64_t> size, cptr, cidx;
    std::vector<double> dur, st;
    std::vector<int32_t> pending;
    std::vector<double> tStart, tEnd;
    std::vector<uint8_t> stranded, released, done, connected;
    std::vector<int64_t> rxBytes;
    std::vector<Ptr<Socket>> txSock, lsnSock;
    int64_t nDone = 0, nStranded = 0;

    // ---------------------------------------------------------------- routing epochs
    int nEpochs = 0, curEpoch = -1;
    std::vector<double> epochTime;             // schedule time (s), epoch 0 at 0
    std::vector<std::vector<int64_t>> pPtr;    // per epoch, (n+1)
    std::vector<std::vector<int32_t>> pLink;   // per epoch
    std::vector<std::vector<uint8_t>> pReach;  // per epoch, (n)
    std::vector<std::vector<uint8_t>> pAlive;  // per epoch, per directed link: 1 = up both ways
    std::vector<std::vector<uint8_t>> pUp;     // per epoch, per directed link: 1 = up
    std::vector<uint8_t> anyDown;              // per epoch: a path computed then may be a detour
    // per transfer: the epoch whose path its node has (inst), whose path its connection uses
    // (connEp: the last reachable one; -1 none), whose path's host routes are installed
    // (routedEp; -1 none)
    std::vector<int> inst, connEp, routedEp;

    // ---------------------------------------------------------------- faults (rate changes)
    std::vector<double> fTime, fFactor;
    std::vector<int64_t> fLink;
    std::vector<Ptr<RateErrorModel>> cut; // per dlink with a down fault: drops at the far end
    std::vector<uint8_t> isDown;

    // ---------------------------------------------------------------- instrumentation
    // frames put on the wire of traced directed links: (time s, dlink, bytes)
    std::vector<uint8_t> traceLink;              // per dlink: 1 = record its frames
    std::vector<double> trT;
    std::vector<int32_t> trL, trB;
    // queue length changes of traced links: (time s, dlink, packets waiting)
    std::vector<double> tqT;
    std::vector<int32_t> tqL, tqP;
    // congestion window changes of traced transfers: (time s, node, cwnd bytes)
    std::vector<uint8_t> traceCwnd;              // per node
    std::vector<double> tcT;
    std::vector<int32_t> tcN;
    std::vector<int64_t> tcW;
    std::vector<double> tConnected;              // per node: handshake completed (schedule time)

    // 1: hand the data to TCP at release, while the SYN is out (TCP sends it right after the
    // handshake's ACK, in the same event); 0: in the connect callback (one event later)
    int sendAtRelease = 1;
    double warmup = 0.0;
    double wallS = 0.0;
    uint64_t events = 0;
    int64_t connectFailures = 0;

    // Transfer i owns the /30 block 10.0.0.0 + 4i: .1 on its source host, .2 on its destination
    static Ipv4Address SrcAddr(int64_t i) { return Ipv4Address(uint32_t(0x0A000000u + 4 * i + 1)); }
    static Ipv4Address DstAddr(int64_t i) { return Ipv4Address(uint32_t(0x0A000000u + 4 * i + 2)); }

    // Did ``node`` originate this frame (PPP + IPv4 as it enters a device queue)? Transfer
    // i's packets come from SrcAddr(i) on src[i] (data, SYN) and DstAddr(i) on dst[i] (ACKs,
    // SYN-ACK).
    bool OwnPacket(int node, Ptr<const Packet> p) const
    {
        Ptr<Packet> c = p->Copy();
        PppHeader ppp;
        c->RemoveHeader(ppp);
        if (ppp.GetProtocol() != 0x0021)
            return false;
        Ipv4Header ip;
        c->PeekHeader(ip);
        uint32_t a = ip.GetSource().Get();
        if ((a >> 24) != 10u)
            return false;
        int64_t i = int64_t((a - 0x0A000000u) / 4);
        if (i >= n)
            return false;
        uint32_t role = a & 3u;
        return role == 1 ? src[i] == node : role == 2 ? dst[i] == node : false;
    }

    // ================================================================ build
    void BuildFabric(int nNodes_, int nHosts_, int nLinks_, const int32_t* lu, const int32_t* lv,
                     const double* bwBytes, const double* latS, int mtu, int bufPkts, int ecnK)
    {
        nNodes = nNodes_;
        nHosts = nHosts_;
        nLinks = nLinks_;
        NodeContainer nodes;
        nodes.Create(nNodes);
        InternetStackHelper stack;
        stack.SetIpv6StackInstall(false);
        Ipv4StaticRoutingHelper staticHelper;
        stack.SetRoutingHelper(staticHelper); // static routing only: no global routing
        stack.Install(nodes);
        srt.resize(nNodes);
        ifLink.assign(nNodes, {});
        for (int u = 0; u < nNodes; ++u)
        {
            Ptr<Ipv4> ip = nodes.Get(u)->GetObject<Ipv4>();
            ip->TraceConnectWithoutContext("Drop", MakeCallback(&Driver::OnIpDrop));
            srt[u] = DynamicCast<Ipv4StaticRouting>(ip->GetRoutingProtocol());
            NS_ABORT_MSG_IF(!srt[u], "expected Ipv4StaticRouting");
        }
        int D = 2 * nLinks;
        dsrc.assign(D, 0);
        ddst.assign(D, 0);
        dev.assign(D, nullptr);
        ifIndex.assign(D, 0);
        peerAddr.assign(D, Ipv4Address());
        nominalBps.assign(D, 0.0);
        txBytes.assign(D, 0.0);
        busyS.assign(D, 0.0);
        drops.assign(D, 0);
        qMax.assign(D, 0);
        TrafficControlHelper tch;
        Ipv4AddressHelper addr;
        // link subnets: 172.16.0.0/12 in /30 blocks (262,144 links); flow addresses: 10/8
        addr.SetBase("172.16.0.0", "255.240.0.0");
        for (int i = 0; i < nLinks; ++i)
        {
            PointToPointHelper p2p;
            p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(std::llround(bwBytes[i] * 8.0)))));
            p2p.SetDeviceAttribute("Mtu", UintegerValue(mtu));
            p2p.SetChannelAttribute("Delay", TimeValue(Seconds(latS[i])));
            // Without this, a full device queue "stops" and the traffic-control layer drops
            // the next packet silently (no queue Drop trace); with it the device queue itself
            // drops and counts: same buffer, visible drops.
            p2p.DisableFlowControl();
            NetDeviceContainer d = p2p.Install(nodes.Get(lu[i]), nodes.Get(lv[i]));
            for (int s = 0; s < 2; ++s)
            {
                int owner = s == 0 ? lu[i] : lv[i];
                Ptr<PortQueue> q = CreateObject<PortQueue>();
                q->owner = owner < nHosts ? owner : -1;
                q->limit = uint32_t(bufPkts);
                q->ecnK = uint32_t(ecnK);
                q->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, 0xFFFFFFFFu));
                DynamicCast<PointToPointNetDevice>(d.Get(s))->SetQueue(q);
            }
            Ipv4AddressHelper one;
            uint32_t base = 0xAC100000u + 4u * uint32_t(i);
            one.SetBase(Ipv4Address(base), Ipv4Mask("255.255.255.252"));
            Ipv4InterfaceContainer ifc = one.Assign(d);
            // Assign installs the default root queue disc on devices with flow control; none
            // must stay, so a packet goes straight to the device's PortQueue and the buffer is
            // exactly bufPkts packets.
            for (int s = 0; s < 2; ++s)
            {
                Ptr<TrafficControlLayer> tc = d.Get(s)->GetNode()->GetObject<TrafficControlLayer>();
                if (tc->GetRootQueueDiscOnDevice(d.Get(s)))
                    tc->DeleteRootQueueDiscOnDevice(d.Get(s));
            }
            for (int s = 0; s < 2; ++s)
            {
                int dl = 2 * i + s;
                dsrc[dl] = s == 0 ? lu[i] : lv[i];
                ddst[dl] = s == 0 ? lv[i] : lu[i];
                dev[dl] = DynamicCast<PointToPointNetDevice>(d.Get(s));
                ifIndex[dl] = ifc.Get(s).second;
                ifLink[dsrc[dl]][ifIndex[dl]] = dl;
                peerAddr[dl] = ifc.GetAddress(1 - s);
                nominalBps[dl] = double(uint64_t(std::llround(bwBytes[i] * 8.0)));
                dev[dl]->TraceConnectWithoutContext("PhyTxBegin", MakeBoundCallback(&Driver::OnPhyTx, dl));
                Ptr<Queue<Packet>> q = dev[dl]->GetQueue();
                q->TraceConnectWithoutContext("Drop", MakeBoundCallback(&Driver::OnDrop, dl));
                q->TraceConnectWithoutContext("PacketsInQueue", MakeBoundCallback(&Driver::OnQueue, dl));
            }
        }
    }

    static void OnPhyTx(int dl, Ptr<const Packet> p)
    {
        Driver* d = g_drv;
        if (!d->traceLink.empty() && d->traceLink[dl])
        {
            d->trT.push_back(Simulator::Now().GetSeconds() - d->warmup);
            d->trL.push_back(dl);
            d->trB.push_back(int32_t(p->GetSize()));
        }
        d->txBytes[dl] += p->GetSize();
        DataRateValue r;
        d->dev[dl]->GetAttribute("DataRate", r);
        d->busyS[dl] += double(p->GetSize()) * 8.0 / double(r.Get().GetBitRate());
    }

    static void OnDrop(int dl, Ptr<const Packet>) { g_drv->drops[dl]++; }

    static void OnQueue(int dl, uint32_t, uint32_t now)
    {
        Driver* d = g_drv;
        if (now > d->qMax[dl])
            d->qMax[dl] = now;
        if (!d->traceLink.empty() && d->traceLink[dl])
        {
            d->tqT.push_back(Simulator::Now().GetSeconds() - d->warmup);
            d->tqL.push_back(dl);
            d->tqP.push_back(int32_t(now));
        }
    }

    static void OnCwnd(int i, uint32_t, uint32_t now)
    {
        Driver* d = g_drv;
        d->tcT.push_back(Simulator::Now().GetSeconds() - d->warmup);
        d->tcN.push_back(i);
        d->tcW.push_back(int64_t(now));
    }

    void SetTrace(const uint8_t* links, const uint8_t* nodes)
    {
        traceLink.assign(links, links + 2 * nLinks);
        traceCwnd.assign(nodes, nodes + n);
    }

    // ================================================================ schedule & routes
    void SetSchedule(int n_, const int8_t* kind_, const int32_t* src_, const int32_t* dst_,
                     const int64_t* size_, const double* dur_, const double* st_,
                     const int64_t* depPtr, const int64_t* cptr_, const int64_t* cidx_)
    {
        n = n_;
        kind.assign(kind_, kind_ + n);
        src.assign(src_, src_ + n);
        dst.assign(dst_, dst_ + n);
        size.assign(size_, size_ + n);
        dur.assign(dur_, dur_ + n);
        st.assign(st_, st_ + n);
        cptr.assign(cptr_, cptr_ + n + 1);
        cidx.assign(cidx_, cidx_ + cptr[n]);
        pending.resize(n);
        for (int i = 0; i < n; ++i)
            pending[i] = int32_t(depPtr[i + 1] - depPtr[i]);
        tStart.assign(n, std::nan(""));
        tEnd.assign(n, std::nan(""));
        stranded.assign(n, 0);
        released.assign(n, 0);
        done.assign(n, 0);
        connected.assign(n, 0);
        tConnected.assign(n, std::nan(""));
        rxBytes.assign(n, 0);
        txSock.assign(n, nullptr);
        lsnSock.assign(n, nullptr);
    }

    void AddEpoch(double t, const int64_t* ptr, const int32_t* link, const uint8_t* reach,
                  const uint8_t* alive, const uint8_t* up)
    {
        epochTime.push_back(t);
        pAlive.emplace_back(alive, alive + 2 * nLinks);
        pUp.emplace_back(up, up + 2 * nLinks);
        anyDown.push_back(std::find(alive, alive + 2 * nLinks, 0) != alive + 2 * nLinks);
        pPtr.emplace_back(ptr, ptr + n + 1);
        pLink.emplace_back(link, link + ptr[n]);
        pReach.emplace_back(reach, reach + n);
        nEpochs++;
    }

    void SetFaults(int m, const double* t, const int64_t* dl, const double* factor)
    {
        fTime.assign(t, t + m);
        fLink.assign(dl, dl + m);
        fFactor.assign(factor, factor + m);
    }

    bool SamePath(int e0, int e1, int i) const
    {
        int64_t a0 = pPtr[e0][i], a1 = pPtr[e0][i + 1], b0 = pPtr[e1][i], b1 = pPtr[e1][i + 1];
        if (pReach[e0][i] != pReach[e1][i] || a1 - a0 != b1 - b0)
            return false;
        for (int64_t k = 0; k < a1 - a0; ++k)
            if (pLink[e0][a0 + k] != pLink[e1][b0 + k])
                return false;
        return true;
    }

    // epoch ep's path of transfer i crosses a link that is down in epoch e: either way (pAlive,
    // the runner's two_way mask: ACKs walk back on l ^ 1), which moves a transfer as the
    // engine's Sim::dead_transfers does, or, with forwardOnly, in its own direction (pUp)
    bool PathDead(int ep, int i, int e, bool forwardOnly = false) const
    {
        const std::vector<uint8_t>& a = forwardOnly ? pUp[e] : pAlive[e];
        for (int64_t k = pPtr[ep][i]; k < pPtr[ep][i + 1]; ++k)
            if (!a[pLink[ep][k]])
                return true;
        return false;
    }

    // The transfers that take epoch e's path: the packet engine's rule (Sim::dead_transfers),
    // so that both run the same paths. A transfer moves when its path crosses a link now down
    // (its connection's path, once it has started: a connection left without any path keeps
    // its old one, whose dead link drops what it sends); when a link comes up, a transfer not
    // yet started moves too if its path was a detour or it had none. Everything else keeps its
    // path: a link coming back does not move connections under way, and ECMP does not rehash
    // flows a failure did not touch. (Until session 41 every transfer took each epoch's path,
    // and the two disagreed wherever that differed.)
    std::vector<int> Moving(int e, int prev)
    {
        std::vector<int> out;
        bool up = false;
        for (size_t l = 0; l < pAlive[e].size(); ++l)
            up = up || (pAlive[e][l] && !pAlive[prev][l]);
        for (int i = 0; i < n; ++i)
        {
            if (kind[i] != 0 || stranded[i])
                continue;
            bool move = false;
            if (!done[i])
            {
                bool unstarted = up && !released[i];
                if (!pReach[inst[i]][i])
                    move = unstarted;
                else
                    move = PathDead(inst[i], i, e) || (unstarted && anyDown[inst[i]]);
            }
            if (!move && released[i] && connEp[i] >= 0)
                move = PathDead(connEp[i], i, e);
            if (move)
                out.push_back(i);
        }
        return out;
    }

    void AddRoutes(int e, int i)
    {
        if (!pReach[e][i])
            return;
        for (int64_t k = pPtr[e][i]; k < pPtr[e][i + 1]; ++k)
        {
            int l = pLink[e][k];
            srt[dsrc[l]]->AddHostRouteTo(DstAddr(i), peerAddr[l], ifIndex[l]);
            int r = l ^ 1; // the reverse direction carries the ACKs
            srt[dsrc[r]]->AddHostRouteTo(SrcAddr(i), peerAddr[r], ifIndex[r]);
        }
    }

    // The path whose host routes transfer i needs in epoch e (-1: none): its connection's once
    // it has started, while that path is alive in its own direction (a connection whose path
    // crosses a dead link and has no other sends for want of a route, as a host whose link
    // lost carrier; it resumes on that path when the link comes back, as in the engine; its
    // ACKs on a dead reverse link are lost there, as the engine's), else its node's.
    int Desired(int i, int e) const
    {
        if (released[i])
            return connEp[i] >= 0 && !PathDead(connEp[i], i, e, true) ? connEp[i] : -1;
        return pReach[inst[i]][i] ? inst[i] : -1;
    }

    // Give the transfers Moving() names epoch e's path, then replace the host routes of every
    // transfer whose Desired path changed.
    void ApplyEpoch(int e)
    {
        int prev = curEpoch;
        curEpoch = e;
        std::vector<int> moving;
        if (prev < 0)
        {
            inst.assign(n, 0);
            connEp.assign(n, -1);
            routedEp.assign(n, -1);
            for (int i = 0; i < n; ++i)
                if (kind[i] == 0)
                    moving.push_back(i);
        }
        else
            moving = Moving(e, prev);
        for (int i : moving)
        {
            inst[i] = e;
            if (pReach[e][i])
                connEp[i] = e;
        }
        std::vector<int> changed;
        for (int i = 0; i < n; ++i)
        {
            if (kind[i] != 0)
                continue;
            int want = Desired(i, e), had = routedEp[i];
            if (want == had || (want >= 0 && had >= 0 && SamePath(had, want, i)))
                continue;
            changed.push_back(i);
            routedEp[i] = want;
        }
        if (changed.empty())
            return;
        if (prev >= 0)
        {
            // (node, address) pairs that get a new route in this epoch
            std::unordered_set<uint64_t> renewed;
            std::unordered_set<uint32_t> gone;
            for (int i : changed)
            {
                gone.insert(DstAddr(i).Get());
                gone.insert(SrcAddr(i).Get());
                int w = routedEp[i];
                if (w < 0)
                    continue;
                for (int64_t k = pPtr[w][i]; k < pPtr[w][i + 1]; ++k)
                {
                    int l = pLink[w][k];
                    renewed.insert((uint64_t(dsrc[l]) << 32) | DstAddr(i).Get());
                    renewed.insert((uint64_t(dsrc[l ^ 1]) << 32) | SrcAddr(i).Get());
                }
            }
            // An old route goes where the new path defines one, or where it leads into a link
            // that is down. Elsewhere it stays, as a real switch keeps forwarding towards the
            // destination: a packet already on its way when the routes move follows the new
            // path from the first switch on it, and dies only if its old path reaches the
            // dead link first (hop-by-hop forwarding after an instant re-convergence).
            for (int u = 0; u < nNodes; ++u)
            {
                Ptr<Ipv4StaticRouting> s = srt[u];
                for (int64_t j = int64_t(s->GetNRoutes()) - 1; j >= 0; --j)
                {
                    Ipv4RoutingTableEntry r = s->GetRoute(uint32_t(j));
                    uint32_t a = r.GetDest().Get();
                    if (!r.IsHost() || !gone.count(a))
                        continue;
                    int dl = ifLink[u].count(r.GetInterface()) ? ifLink[u][r.GetInterface()] : -1;
                    bool dead = dl >= 0 && !isDown.empty() && isDown[dl];
                    if (dead || renewed.count((uint64_t(u) << 32) | a))
                        s->RemoveRoute(uint32_t(j));
                }
            }
        }
        // a transfer under way that lost its path keeps its socket: what it sends is dropped for
        // want of a route while its timers back off, and it resumes when its path comes back or
        // a later epoch gives it another (TCP strands it after DataRetries timeouts,
        // OnErrorClose), as the packet engine does
        for (int i : changed)
            if (routedEp[i] >= 0)
                AddRoutes(routedEp[i], i);
    }

    // ================================================================ TCP plumbing
    static void OnAccept(int i, Ptr<Socket> s, const Address&)
    {
        s->SetRecvCallback(MakeBoundCallback(&Driver::OnRecv, i));
    }

    static void OnRecv(int i, Ptr<Socket> s)
    {
        Driver* d = g_drv;
        Ptr<Packet> p;
        while ((p = s->Recv()))
            d->rxBytes[i] += p->GetSize();
        if (!d->done[i] && !d->stranded[i] && d->released[i] && d->rxBytes[i] >= d->size[i])
            d->Finish(i);
    }

    // Handshake done: hand the whole transfer to TCP (the data follows the handshake's ACK).
    static void OnConnected(int i, Ptr<Socket> s)
    {
        Driver* d = g_drv;
        d->connected[i] = 1;
        d->tConnected[i] = Simulator::Now().GetSeconds() - d->warmup;
        if (d->stranded[i] || d->done[i] || d->sendAtRelease)
            return;
        d->SendAll(i, s);
    }

    void SendAll(int i, Ptr<Socket> s)
    {
        Driver* d = this;
        int64_t left = d->size[i];
        const int64_t chunk = int64_t(1) << 30;
        while (left > 0)
        {
            uint32_t b = uint32_t(std::min(left, chunk));
            int r = s->Send(Create<Packet>(b));
            NS_ABORT_MSG_IF(r < 0, "netcosim ns-3 driver: Send failed for transfer " << i);
            left -= b;
        }
    }
    // never expected (no loss model, routes installed before the SYN): counted and reported
    // TCP gave up (SYN retries, or DataRetries timeouts in a row): the transfer is stranded,
    // after the callback has returned (Strand closes the socket)
    static void OnConnectFail(int i, Ptr<Socket>)
    {
        g_drv->connectFailures++;
        Simulator::ScheduleNow([i]() { g_drv->Strand(i); });
    }

    static void OnNormalClose(int, Ptr<Socket>) {}

    static void OnErrorClose(int i, Ptr<Socket>)
    {
        Simulator::ScheduleNow([i]() { g_drv->Strand(i); });
    }

    void PrintRoutes(int u)
    {
        srt[u]->PrintRoutingTable(Create<OutputStreamWrapper>(&std::cout));
    }

    void RemoveConnectedRoute(int u, Ipv4Address net, uint32_t iface)
    {
        Ptr<Ipv4StaticRouting> s = srt[u];
        for (int64_t j = int64_t(s->GetNRoutes()) - 1; j >= 0; --j)
        {
            Ipv4RoutingTableEntry r = s->GetRoute(uint32_t(j));
            if (r.IsNetwork() && r.GetDestNetwork() == net && r.GetInterface() == iface &&
                r.GetDestNetworkMask() == Ipv4Mask("255.255.255.252"))
                s->RemoveRoute(uint32_t(j));
        }
    }

    void Open(int i)
    {
        Ptr<Node> ns = NodeList::GetNode(src[i]);
        Ptr<Node> nd = NodeList::GetNode(dst[i]);
        // The destination address lives on the loopback interface (a host accepts packets for
        // any of its addresses whatever interface they arrive on). TCP takes its source address
        // from the route at connect time (TcpSocketBase::SetupEndpoint ignores Bind), and
        // Ipv4StaticRouting picks, on the outgoing interface, the address in the destination's
        // subnet: so the source address goes on the first hop's interface as a /30 that holds
        // both of the transfer's addresses.
        nd->GetObject<Ipv4>()->AddAddress(0, Ipv4InterfaceAddress(DstAddr(i), Ipv4Mask("255.255.255.255")));
        int first = pLink[inst[i]][pPtr[inst[i]][i]];
        ns->GetObject<Ipv4>()->AddAddress(ifIndex[first], Ipv4InterfaceAddress(SrcAddr(i), Ipv4Mask("255.255.255.252")));
        // Adding the address also installs a connected route to its /30, which holds the
        // destination: it would keep the host sending out of that interface after an epoch
        // removes the transfer's host route (its first link down, no other path), so frames
        // went into the dead link and the ones serialised late in an outage survived it. Only
        // the host routes decide: with none, TCP's sends die for want of a route, as a host
        // whose link lost carrier drops what it is given (and as the packet engine does).
        RemoveConnectedRoute(src[i], SrcAddr(i).CombineMask(Ipv4Mask("255.255.255.252")), ifIndex[first]);
        Ptr<Socket> l = Socket::CreateSocket(nd, TcpSocketFactory::GetTypeId());
        l->Bind(InetSocketAddress(DstAddr(i), 9));
        l->Listen();
        l->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                             MakeBoundCallback(&Driver::OnAccept, i));
        lsnSock[i] = l;
        Ptr<Socket> s = Socket::CreateSocket(ns, TcpSocketFactory::GetTypeId());
        s->Bind();
        s->SetConnectCallback(MakeBoundCallback(&Driver::OnConnected, i),
                              MakeBoundCallback(&Driver::OnConnectFail, i));
        s->SetCloseCallbacks(MakeBoundCallback(&Driver::OnNormalClose, i),
                             MakeBoundCallback(&Driver::OnErrorClose, i));
        if (!traceCwnd.empty() && traceCwnd[i])
            s->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&Driver::OnCwnd, i));
        s->Connect(InetSocketAddress(DstAddr(i), 9));
        txSock[i] = s;
    }

    // ================================================================ DAG
    void Release(int i)
    {
        if (stranded[i] || released[i])
            return;
        released[i] = 1;
        tStart[i] = Simulator::Now().GetSeconds() - warmup;
        if (kind[i] != 0)
        {
            Simulator::Schedule(Seconds(dur[i]), [this, i]() { if (!stranded[i]) Finish(i); });
            return;
        }
        if (size[i] == 0)
        {
            Finish(i);
            return;
        }
        if (!pReach[inst[i]][i])
        {
            Strand(i);
            return;
        }
        Open(i); // SYN now
        if (sendAtRelease)
            SendAll(i, txSock[i]);
    }

    void Finish(int i)
    {
        if (done[i])
            return;
        done[i] = 1;
        tEnd[i] = Simulator::Now().GetSeconds() - warmup;
        nDone++;
        for (int64_t k = cptr[i]; k < cptr[i + 1]; ++k)
        {
            int c = int(cidx[k]);
            if (--pending[c] == 0)
                ReleaseWhenDue(c);
        }
        CheckEnd();
    }

    // A node whose parents are done starts in an event of its own (at once, or at its start
    // time), after whatever the current event still does: when the last segment of a parent
    // arrives, TCP's ACK for it goes out before the child's SYN (as in a real stack, where the
    // kernel ACKs before the application is woken; and as in the packet engine).
    void ReleaseWhenDue(int i)
    {
        double at = warmup + st[i];
        double now = Simulator::Now().GetSeconds();
        if (at <= now)
            Simulator::ScheduleNow([this, i]() { Release(i); });
        else
            Simulator::Schedule(Seconds(at - now), [this, i]() { Release(i); });
    }

    void Strand(int i)
    {
        std::vector<int> stack{i};
        while (!stack.empty())
        {
            int j = stack.back();
            stack.pop_back();
            if (stranded[j] || done[j])
                continue;
            stranded[j] = 1;
            nStranded++;
            if (txSock[j])
                txSock[j]->Close();
            for (int64_t k = cptr[j]; k < cptr[j + 1]; ++k)
                stack.push_back(int(cidx[k]));
        }
        CheckEnd();
    }

    void CheckEnd()
    {
        if (nDone + nStranded >= n)
            Simulator::Stop();
    }

    // A fault on directed link l. degrade/up: the device's DataRate (from its next frame on).
    // down: the link loses what it holds, as a cut cable: its device queue is flushed (counted
    // as drops) and every frame that reaches the far end from now on is dropped there (the
    // one being serialised and those propagating: a receive error model with rate 1 on the
    // far device, counted through PhyRxDrop). The routes move away from it at the same instant
    // (ApplyEpoch); packets already upstream are forwarded by the new per-hop routes. up: the
    // far end receives again.
    void ApplyRate(int k)
    {
        int64_t l = fLink[k];
        double f = fFactor[k];
        if (f <= 0)
        {
            if (!isDown[l])
            {
                isDown[l] = 1;
                cut[l]->Enable();
                dev[l]->GetQueue()->Flush();
            }
            return;
        }
        if (isDown[l])
        {
            isDown[l] = 0;
            cut[l]->Disable();
        }
        dev[l]->SetDataRate(DataRate(uint64_t(std::llround(nominalBps[l] * f))));
    }

    static void OnRxDrop(int dl, Ptr<const Packet>) { g_drv->drops[dl]++; }

    // IP-level drops (no route: a packet that was on its way when its transfer's routes moved
    // and reached a switch no longer on the path)
    uint64_t ipDrops = 0;
    static void OnIpDrop(const Ipv4Header&, Ptr<const Packet>, Ipv4L3Protocol::DropReason, Ptr<Ipv4>, uint32_t)
    {
        g_drv->ipDrops++;
    }

    // a disabled "cut" error model on the receiving device of every directed link that has a
    // down fault (enabled while the link is down)
    void PrepareCuts()
    {
        cut.assign(dev.size(), nullptr);
        isDown.assign(dev.size(), 0);
        for (size_t k = 0; k < fTime.size(); ++k)
        {
            int64_t l = fLink[k];
            if (fFactor[k] > 0 || cut[l])
                continue;
            Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
            em->SetUnit(RateErrorModel::ERROR_UNIT_PACKET);
            em->SetRate(1.0);
            em->Disable();
            Ptr<PointToPointNetDevice> far = dev[l ^ 1]; // the device at l's far end
            far->SetReceiveErrorModel(em);
            far->TraceConnectWithoutContext("PhyRxDrop", MakeBoundCallback(&Driver::OnRxDrop, int(l)));
            cut[l] = em;
        }
    }

    // ================================================================ run
    double Run(double warmup_, double horizon)
    {
        warmup = warmup_;
        g_drv = this;
        ApplyEpoch(0);
        PrepareCuts();
        for (size_t k = 0; k < fTime.size(); ++k)
        {
            if (fTime[k] <= 0)
                ApplyRate(int(k));
            else
                Simulator::Schedule(Seconds(warmup + fTime[k]), [this, k]() { ApplyRate(int(k)); });
        }
        for (int e = 1; e < nEpochs; ++e)
            Simulator::Schedule(Seconds(warmup + epochTime[e]), [this, e]() { ApplyEpoch(e); });
        Simulator::Schedule(Seconds(warmup), [this]() {
            for (int i = 0; i < n; ++i)
                if (pending[i] == 0)
                    ReleaseWhenDue(i);
            CheckEnd();
        });
        if (horizon > 0)
            Simulator::Stop(Seconds(warmup + horizon));
        uint64_t ev0 = Simulator::GetEventCount();
        auto t0 = std::chrono::steady_clock::now();
        Simulator::Run();
        auto t1 = std::chrono::steady_clock::now();
        events = Simulator::GetEventCount() - ev0;
        wallS = std::chrono::duration<double>(t1 - t0).count();
        for (size_t l = 0; l < dev.size(); ++l)
            queueDrops.push_back(dev[l]->GetQueue()->GetTotalDroppedPackets());
        return wallS;
    }

    double Now() const { return Simulator::Now().GetSeconds() - warmup; }

    // Tear the run down so the next run in this process starts from an empty world.
    void Destroy()
    {
        txSock.clear();
        lsnSock.clear();
        cut.clear();
        dev.clear();
        srt.clear();
        Simulator::Destroy();
        g_drv = nullptr;
    }
};


bool PortQueue::Enqueue(Ptr<Packet> item)
{
    if (owner >= 0 && g_drv->OwnPacket(owner, item))
        return DoEnqueue(GetContainer().end(), item);
    uint32_t waiting = GetNPackets();
    if (waiting >= limit)
    {
        DropBeforeEnqueue(item);
        return false;
    }
    if (ecnK > 0 && waiting >= ecnK)
    {
        // the frame holds PPP + IPv4 here (PointToPointNetDevice::Send adds the PPP header
        // before it enqueues); the IPv4 header checksum is off (ns-3's default)
        PppHeader ppp;
        item->RemoveHeader(ppp);
        if (ppp.GetProtocol() == 0x0021)
        {
            Ipv4Header ip;
            item->RemoveHeader(ip);
            if (ip.GetEcn() != Ipv4Header::ECN_NotECT)
            {
                ip.SetEcn(Ipv4Header::ECN_CE);
                ++marks;
            }
            item->AddHeader(ip);
        }
        item->AddHeader(ppp);
    }
    return DoEnqueue(GetContainer().end(), item);
}

void CopyOut(const Driver& d, double* start, double* end, uint8_t* stranded, double* linkBytes,
             double* linkBusy, uint64_t* drops, uint64_t* qMax)
{
    std::copy(d.tStart.begin(), d.tStart.end(), start);
    std::copy(d.tEnd.begin(), d.tEnd.end(), end);
    std::copy(d.stranded.begin(), d.stranded.end(), stranded);
    std::copy(d.txBytes.begin(), d.txBytes.end(), linkBytes);
    std::copy(d.busyS.begin(), d.busyS.end(), linkBusy);
    std::copy(d.drops.begin(), d.drops.end(), drops);
    std::copy(d.qMax.begin(), d.qMax.end(), qMax);
}

// Packets marked CE at each directed link's queue (dctcp), in ``marks`` (2 * nLinks).
void CopyMarks(const Driver& d, uint64_t* marks)
{
    for (size_t dl = 0; dl < d.dev.size(); ++dl)
        marks[dl] = DynamicCast<PortQueue>(d.dev[dl]->GetQueue())->marks;
}

} // namespace netcosim_ns3

namespace netcosim_ns3 {
// TCP settings every socket created afterwards picks up (Config::SetDefault). The values and
// the ns-3.44 defaults they replace are documented in docs/ns3.md.
void Configure(uint32_t segmentSize, uint32_t sndBuf, uint32_t rcvBuf, uint32_t delAckCount,
               bool sack, bool timestamps, const std::string& recovery, uint32_t initialCwnd,
               double minRtoS, double initRtoS, double clockGranularityS, double connTimeoutS,
               uint32_t synRetries, uint32_t dataRetries, uint32_t dupAckThreshold,
               bool limitedTransmit, double delAckTimeoutS, const std::string& socketType,
               double dctcpG, double dctcpAlphaInit, uint32_t dctcpFloorSegments)
{
    using namespace ns3;
    // ns3::TcpNewReno for tcp; ns3::TcpDctcp (TcpLinuxReno's window growth, ECT on every
    // packet, RFC 8257's alpha) for dctcp, with Linux's floor on a cut if asked
    TcpDctcpFloor::GetTypeId(); // registers the TypeId
    TcpDctcpFloor::floorSegments = dctcpFloorSegments;
    std::string type = socketType;
    if (type == "ns3::TcpDctcp" && dctcpFloorSegments > 0)
        type = "netcosim_ns3::TcpDctcpFloor";
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(type)));
    Config::SetDefault("ns3::TcpDctcp::DctcpShiftG", DoubleValue(dctcpG));
    Config::SetDefault("ns3::TcpDctcp::DctcpAlphaOnInit", DoubleValue(dctcpAlphaInit));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TypeId::LookupByName(recovery)));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(segmentSize));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(sndBuf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(rcvBuf));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(initialCwnd));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(timestamps));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(minRtoS)));
    Config::SetDefault("ns3::RttEstimator::InitialEstimation", TimeValue(Seconds(initRtoS)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity",
                       TimeValue(Seconds(clockGranularityS)));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(connTimeoutS)));
    Config::SetDefault("ns3::TcpSocket::ConnCount", UintegerValue(synRetries));
    Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(dataRetries));
    Config::SetDefault("ns3::TcpSocketBase::ReTxThreshold", UintegerValue(dupAckThreshold));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(limitedTransmit));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(Seconds(delAckTimeoutS)));
}
} // namespace netcosim_ns3
