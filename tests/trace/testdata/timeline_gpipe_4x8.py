# Generates timeline_gpipe_4x8.json beside this script: a GPIPE K=4, M=8 run as gpipe's trace
# writer records it (two steps 11 and 12, jittered durations, transfer latency, loads, optimizer,
# recv waits, metadata), following the trace format in docs/metrics-and-traces.md ("Traces"). Run once;
# the JSON is committed.
import json, os, random
random.seed(7)
K, M = 4, 8
ev = []
for r in range(K):
    ev.append({"ph":"M","name":"process_name","pid":r,"tid":0,"args":{"name":f"stage {r}, replica 0"}})
    ev.append({"ph":"M","name":"process_sort_index","pid":r,"tid":0,"args":{"sort_index":r}})
    for t, n in enumerate(["steps","compute","comm","transfers"]):
        ev.append({"ph":"M","name":"thread_name","pid":r,"tid":t,"args":{"name":n}})
def span(r, tid, ts, dur, name, cat, step, mb=None, ins=0):
    a = {"step": step, "stage": r, "eval": False, "instruction": ins}
    if mb is not None: a.update({"micro_batch": mb, "chunk": 0})
    ev.append({"ph":"X","pid":r,"tid":tid,"ts":round(ts,3),"dur":round(dur,3),"name":name,"cat":cat,"args":a})
t0 = 0.0
flow = 0
for step in (11, 12):
    start = [t0 + random.uniform(0, 6) for _ in range(K)]
    clock = start[:]
    fwd_done = {}
    ins = [0]*K
    for m in range(M):
        for s in range(K):
            if s == 0:
                d = random.uniform(8, 12); span(s,1,clock[s],d,f"load {m}","load",step,m,ins[s]); ins[s]+=1; clock[s]+=d
            else:
                ready = fwd_done[(s-1,m)] + 15
                if ready > clock[s]:
                    span(s,2,clock[s],ready-clock[s],f"recv act {m}","recv_wait",step,m,ins[s])
                    clock[s] = ready
                ins[s]+=1
            d = random.gauss(120, 6) * (1.15 if s == K-1 else 1.0)
            span(s,1,clock[s],d,f"F{m}","forward",step,m,ins[s]); ins[s]+=1; clock[s]+=d
            fwd_done[(s,m)] = clock[s]
            if s < K-1:
                span(s,2,clock[s],1.2,f"send act {m}","send",step,m,ins[s]); ins[s]+=1; clock[s]+=1.2
    bwd_done = {}
    for m in reversed(range(M)):
        for s in reversed(range(K)):
            if s < K-1:
                ready = bwd_done[(s+1,m)] + 15
                if ready > clock[s]:
                    span(s,2,clock[s],ready-clock[s],f"recv grad {m}","recv_wait",step,m,ins[s])
                    clock[s] = ready
                ins[s]+=1
            d = random.gauss(240 if s == K-1 else 360, 10)
            span(s,1,clock[s],d,f"B{m}","backward",step,m,ins[s]); ins[s]+=1; clock[s]+=d
            bwd_done[(s,m)] = clock[s]
            if s > 0:
                span(s,2,clock[s],1.2,f"send grad {m}","send",step,m,ins[s]); ins[s]+=1; clock[s]+=1.2
    sync_end = max(clock) + 20
    for s in range(K):
        span(s,2,clock[s],sync_end-clock[s],"gradient sync","sync",step)
        d = random.uniform(25, 35)
        span(s,1,sync_end,d,"optimizer","optimizer",step)
        clock[s] = sync_end + d
        ev.append({"ph":"X","pid":s,"tid":0,"ts":round(start[s],3),"dur":round(clock[s]-start[s],3),"name":f"step {step}","cat":"step","args":{"step":step}})
    ev.append({"ph":"i","s":"g","name":f"step {step}","pid":0,"tid":0,"ts":round(t0,3)})
    t0 = max(clock) + 50
doc = {"displayTimeUnit":"ms","otherData":{"generator":"gpipe","format":1,"plan":"mlp-synthetic","schedule":"GPIPE","stages":K,"micro_batches":M,"chunks":1,"remat":"EXCEPT_LAST","device":"CPU","ranks":K,"status":"ok","clock_offset_us":[0,1.5,2.0,-0.5],"clock_uncertainty_us":[0,3.0,2.5,4.0],"missing_ranks":[]},"traceEvents":ev}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "timeline_gpipe_4x8.json"), "w") as f:
    f.write('{"displayTimeUnit": "ms",\n "otherData": ' + json.dumps(doc["otherData"]) + ',\n "traceEvents": [\n')
    f.write(",\n".join("  " + json.dumps(e, separators=(",",":")) for e in ev))
    f.write("\n ]}\n")
