#!/usr/bin/env python3
"""The include graph between source folders, and its cycles (issue 31): every folder under the
given top folders, the folders its files include from ("engine/x/y.h" names folder engine/x),
and the strongly connected components of more than one folder. Exit 1 when there is a cycle.
    tests/tools/folder_graph.py [ROOT] [TOP ...]   (default: . engine jobs runner)"""
import os,re,sys,collections
root=sys.argv[1] if len(sys.argv) > 1 else '.'; tops=sys.argv[2:] or ['engine','jobs','runner']
edges=collections.defaultdict(set); cnt=collections.Counter()
for top in tops:
  for dp,dn,fn in os.walk(os.path.join(root,top)):
    for f in fn:
      if not f.endswith(('.h','.cpp')): continue
      src=os.path.relpath(dp,root)
      for line in open(os.path.join(dp,f),errors='replace'):
        m=re.match(r'\s*#\s*include\s+"([^"]+)"',line)
        if not m: continue
        inc=m.group(1)
        # resolve: project includes relative to root
        d=os.path.dirname(inc)
        if not d: d=src
        if not os.path.exists(os.path.join(root,inc)) and os.path.exists(os.path.join(root,src,inc)): d=os.path.normpath(os.path.join(src,os.path.dirname(inc)))
        if d!=src:
          edges[src].add(d); cnt[(src,d)]+=1
for s in sorted(edges): print(s,'->',' '.join(sorted(edges[s])))
# cycles via SCC
import itertools
nodes=set(edges)|{d for v in edges.values() for d in v}
idx={};low={};st=[];on=set();sccs=[];c=[0]
def sc(v):
  idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
  for w in edges.get(v,()):
    if w not in idx: sc(w);low[v]=min(low[v],low[w])
    elif w in on: low[v]=min(low[v],idx[w])
  if low[v]==idx[v]:
    comp=[]
    while True:
      w=st.pop();on.discard(w);comp.append(w)
      if w==v:break
    if len(comp)>1: sccs.append(comp)
sys.setrecursionlimit(10000)
for v in sorted(nodes):
  if v not in idx: sc(v)
print('cycles:',sccs if sccs else 'none')
sys.exit(1 if sccs else 0)
