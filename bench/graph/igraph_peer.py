"""igraph on the same edges as the graph service: BFS to the same depth (first 100 moments, like the
service's limit) and shortest paths between the same pairs. Prints per-query milliseconds as JSON."""
import csv
import json
import sys
import time

import igraph

CAUSAL = {"causes", "caused_by", "precedes", "follows", "influences"}

edges_file, queries_file = sys.argv[1], sys.argv[2]
all_edges, causal_edges = [], []
with open(edges_file) as handle:
    for source, target, kind in csv.reader(handle):
        pair = (int(source), int(target))
        if kind != "challenges":
            all_edges.append(pair)
        if kind in CAUSAL:
            causal_edges.append(pair)
size = 1 + max(max(pair) for pair in all_edges)
causal = igraph.Graph(n=size, edges=causal_edges, directed=False)
undirected = igraph.Graph(n=size, edges=all_edges, directed=False)
queries = json.load(open(queries_file))


def bfs_first(graph, anchor, depth, limit=100):
    reached = 0
    for _vertex, distance, _parent in graph.bfsiter(anchor, advanced=True):
        if distance > depth or reached >= limit:
            break
        reached += 1
    return reached


def timed(function, items):
    times = []
    for item in items:
        started = time.perf_counter()
        function(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


print(json.dumps({
    "traverse2": timed(lambda anchor: bfs_first(causal, anchor, 2), queries["anchors"]),
    "traverse4": timed(lambda anchor: bfs_first(causal, anchor, 4), queries["anchors"]),
    "path": timed(lambda pair: undirected.get_shortest_path(pair[0], pair[1]), queries["pairs"]),
}))
