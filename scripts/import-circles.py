#!/usr/bin/env python3
# Import circles between the source files of each crate: `crate::`/`super::` paths in code (not
# comments, not tests), a file importing from a file that imports from it, parent modules that
# declare their children excepted. Usage: python3 scripts/import-circles.py [REPO]
import os, re, sys, itertools
# file-level import graph per crate: `use crate::a::b::...` and `super::` paths, `crate::x::` paths in code
root = sys.argv[1] if len(sys.argv) > 1 else "."
crates = [d for d in os.listdir(root) if os.path.isfile(os.path.join(root,d,'Cargo.toml')) and os.path.isdir(os.path.join(root,d,'src'))]
total_cycles = []
for c in sorted(crates):
    src = os.path.join(root,c,'src')
    mods = {}  # module path tuple -> file
    for dp,_,fs in os.walk(src):
        for f in fs:
            if not f.endswith('.rs'): continue
            rel = os.path.relpath(os.path.join(dp,f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ('mod','lib','main'): parts = parts[:-1]
            if parts and parts[0]=='bin': continue
            mods[tuple(parts)] = os.path.join(dp,f)
    def resolve(path):
        for n in range(len(path),-1,-1):
            if tuple(path[:n]) in mods: return tuple(path[:n])
    edges = {m:set() for m in mods}
    for m,f in mods.items():
        text = open(f).read()
        text = text.split('#[cfg(test)]')[0]
        text = '\n'.join(l for l in text.split('\n') if not l.lstrip().startswith('//'))
        for p in re.findall(r'\b((?:crate|super)(?:::\w+)+)', text):
            segs = p.split('::')
            if segs[0]=='crate': base=[]; rest=segs[1:]
            else:
                base=list(m); rest=segs
                while rest and rest[0]=='super': base=base[:-1]; rest=rest[1:]
            t = resolve(base+rest)
            if t is not None and t != m:
                edges[m].add(t)
    # cycles between two or more files, ignoring edges where one is an ancestor of the other (lib/mod declaring children)
    def anc(a,b): return len(a)<len(b) and b[:len(a)]==a
    for a in mods:
        for b in edges[a]:
            if a in edges.get(b,()) and a<b and not anc(a,b) and not anc(b,a):
                total_cycles.append((c,a,b))
    # longer cycles via DFS (excluding ancestor edges)
    g = {a:{b for b in edges[a] if not anc(a,b) and not anc(b,a)} for a in mods}
    idx={}; low={}; st=[]; on=set(); sccs=[]; i=[0]
    def sc(v):
        idx[v]=low[v]=i[0]; i[0]+=1; st.append(v); on.add(v)
        for w in g[v]:
            if w not in idx: sc(w); low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop(); on.discard(w); comp.append(w)
                if w==v: break
            if len(comp)>1: sccs.append(comp)
    for v in g:
        if v not in idx: sc(v)
    for comp in sccs: print(c, 'cycle:', ['::'.join(x) or 'lib' for x in comp])
print('two-file circles:', [(c,'::'.join(a),'::'.join(b)) for c,a,b in total_cycles])
