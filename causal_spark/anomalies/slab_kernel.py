"""Kernels of the slab method for crown components (`crowns_slabs`); no Spark here.

Pure NumPy in, NumPy out, compiled with Numba. One slab's graph and its strongly
connected components (step 1), the port graph's topological order of one trace
(step 2), and each local component's global label (step 3); the steps are
described in `causal_spark.anomalies.crowns_slabs` and docs/anomalies.md.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from causal_spark.anomalies.crown_kernel import _tarjan
from causal_spark.anomalies.errors import ComponentMismatchError
from causal_spark.anomalies.kernel import _first_at_least

NODE_SHIFT = 40  # a node (a send event) is src_pidx << NODE_SHIFT | send_lseq

_INF32 = np.iinfo(np.int32).max
_LOCAL_LABEL_SLAB = np.int64(1) << 32


def slab_graph(
    pidx: np.ndarray, lseq: np.ndarray, node: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The graph of one slab's message events: (nodes, local node of each row, adj_start, adj,
    component of each local node). Each process's rows are chained in lseq order; rows of one
    node are one local node. Components are Tarjan's: an edge u -> v between two of them
    has comp[v] < comp[u]."""
    nodes, local = np.unique(node, return_inverse=True)
    local = local.reshape(-1).astype(np.int64)
    order = np.lexsort((lseq, pidx))
    p, at = pidx[order], local[order]
    keep = (p[1:] == p[:-1]) & (at[1:] != at[:-1])
    edge_from, edge_to = at[:-1][keep], at[1:][keep]
    by_source = np.argsort(edge_from, kind="stable")
    adj = edge_to[by_source].astype(np.int64)
    adj_start = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_from, minlength=len(nodes)), out=adj_start[1:])
    comp = _tarjan(len(nodes), adj_start, adj)
    return nodes, local, adj_start, adj, comp


@njit(cache=True, nogil=True)
def _components_by_index(comp: np.ndarray, n_comp: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(comp, kind="mergesort")
    start = np.zeros(n_comp + 1, dtype=np.int64)
    for u in range(comp.shape[0]):
        start[comp[u] + 1] += 1
    for c in range(n_comp):
        start[c + 1] += start[c]
    return order, start


@njit(cache=True, nogil=True)
def _earliest_reached(
    comp: np.ndarray,
    n_comp: int,
    adj_start: np.ndarray,
    adj: np.ndarray,
    row_local: np.ndarray,
    row_q: np.ndarray,
    row_lseq: np.ndarray,
    n_q: int,
) -> np.ndarray:
    """[component, process] the earliest lseq the component reaches on that process."""
    reach = np.full((n_comp, n_q), _INF32, dtype=np.int32)
    for r in range(row_local.shape[0]):
        c = comp[row_local[r]]
        if row_lseq[r] < reach[c, row_q[r]]:
            reach[c, row_q[r]] = row_lseq[r]
    order, start = _components_by_index(comp, n_comp)
    for c in range(n_comp):  # successors have smaller indices: already final
        for i in range(start[c], start[c + 1]):
            u = order[i]
            for k in range(adj_start[u], adj_start[u + 1]):
                d = comp[adj[k]]
                if d != c:
                    for q in range(n_q):
                        if reach[d, q] < reach[c, q]:
                            reach[c, q] = reach[d, q]
    return reach


@njit(cache=True, nogil=True)
def _port_edges(
    reach: np.ndarray,
    comp: np.ndarray,
    port_nodes: np.ndarray,
    q_start: np.ndarray,
    q_lseq: np.ndarray,
    q_node: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Edges among port nodes that keep their reachability in the slab: a port node to the
    first port event it reaches on each process, and each port event to the next one."""
    n_q = q_start.shape[0] - 1
    cap = port_nodes.shape[0] * n_q + q_lseq.shape[0]
    src = np.empty(cap, dtype=np.int64)
    dst = np.empty(cap, dtype=np.int64)
    used = 0
    for a in port_nodes:
        c = comp[a]
        for q in range(n_q):
            lo = q_start[q]
            hi = q_start[q + 1]
            want = reach[c, q]
            if want == _INF32:
                continue
            first = _first_at_least(q_lseq[lo:hi], hi - lo, want)
            if first >= 0 and q_node[lo + first] != a:
                src[used] = a
                dst[used] = q_node[lo + first]
                used += 1
    for q in range(n_q):
        for i in range(q_start[q], q_start[q + 1] - 1):
            if q_node[i] != q_node[i + 1]:
                src[used] = q_node[i]
                dst[used] = q_node[i + 1]
                used += 1
    return src[:used], dst[:used]


def slab_port_edges(
    pidx: np.ndarray, lseq: np.ndarray, node: np.ndarray, is_port: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Round 1 on one slab: (from node, to node) edges among its port nodes whose transitive
    closure is the reachability among them within the slab."""
    pidx = np.asarray(pidx, dtype=np.int64)
    lseq = np.asarray(lseq, dtype=np.int64)
    node = np.asarray(node, dtype=np.int64)
    is_port = np.asarray(is_port, dtype=np.bool_)
    nodes, local, adj_start, adj, comp = slab_graph(pidx, lseq, node)
    if len(nodes) == 0 or not is_port.any():
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    n_comp = int(comp.max()) + 1
    procs, q = np.unique(pidx, return_inverse=True)
    q = q.reshape(-1).astype(np.int64)
    reach = _earliest_reached(
        comp, n_comp, adj_start, adj, local, q, lseq.astype(np.int32), len(procs)
    )
    node_port = np.zeros(len(nodes), dtype=np.bool_)
    node_port[local[is_port]] = True
    # every event of a port node is a target: reaching any of them reaches the node
    rows = np.flatnonzero(node_port[local])
    rows = rows[np.lexsort((lseq[rows], q[rows]))]
    q_start = np.zeros(len(procs) + 1, dtype=np.int64)
    np.cumsum(np.bincount(q[rows], minlength=len(procs)), out=q_start[1:])
    src, dst = _port_edges(
        reach, comp, np.flatnonzero(node_port).astype(np.int64), q_start,
        lseq[rows].astype(np.int32), local[rows],
    )  # fmt: skip
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0) if len(src) else np.empty((0, 2))
    return nodes[pairs[:, 0].astype(np.int64)], nodes[pairs[:, 1].astype(np.int64)]


def port_graph_order(
    from_slab: np.ndarray, from_node: np.ndarray, to_slab: np.ndarray, to_node: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Round 2 on one trace: (slab, node, t) of every port-graph vertex, t the topological
    index of its strongly connected component (edges never lower it; equal t, one component)."""
    slabs = np.concatenate([from_slab, to_slab]).astype(np.int64)
    nodes = np.concatenate([from_node, to_node]).astype(np.int64)
    if len(slabs) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    vertices, ids = np.unique(np.stack([slabs, nodes], axis=1), axis=0, return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    m = len(from_slab)
    head, tail = ids[:m], ids[m:]
    by_source = np.argsort(head, kind="stable")
    adj = tail[by_source]
    adj_start = np.zeros(len(vertices) + 1, dtype=np.int64)
    np.cumsum(np.bincount(head, minlength=len(vertices)), out=adj_start[1:])
    comp = _tarjan(len(vertices), adj_start, adj)
    topo = int(comp.max()) - comp  # Tarjan numbers sinks first
    return vertices[:, 0], vertices[:, 1], topo


@njit(cache=True, nogil=True)
def _labels(
    comp: np.ndarray, n_comp: int, adj_start: np.ndarray, adj: np.ndarray, node_t: np.ndarray
) -> np.ndarray:
    """Per local component: the port-graph component (t) it belongs to, or -1."""
    big = np.iinfo(np.int64).max
    least_after = np.full(n_comp, big, dtype=np.int64)  # min t over ports it reaches
    most_before = np.full(n_comp, -1, dtype=np.int64)  # max t over ports reaching it
    for u in range(comp.shape[0]):
        if node_t[u] >= 0:
            c = comp[u]
            least_after[c] = min(least_after[c], node_t[u])
            most_before[c] = max(most_before[c], node_t[u])
    order, start = _components_by_index(comp, n_comp)
    for c in range(n_comp):  # successors first
        for i in range(start[c], start[c + 1]):
            u = order[i]
            for k in range(adj_start[u], adj_start[u + 1]):
                d = comp[adj[k]]
                if d != c and least_after[d] < least_after[c]:
                    least_after[c] = least_after[d]
    for c in range(n_comp - 1, -1, -1):  # predecessors first: push forward
        for i in range(start[c], start[c + 1]):
            u = order[i]
            for k in range(adj_start[u], adj_start[u + 1]):
                d = comp[adj[k]]
                if d != c and most_before[c] > most_before[d]:
                    most_before[d] = most_before[c]
    out = np.full(n_comp, -1, dtype=np.int64)
    for c in range(n_comp):
        if most_before[c] >= 0 and least_after[c] == most_before[c]:
            out[c] = most_before[c]
    return out


def slab_labels(
    slab: int,
    pidx: np.ndarray,
    lseq: np.ndarray,
    node: np.ndarray,
    port_node: np.ndarray,
    port_t: np.ndarray,
) -> np.ndarray:
    """Round 3 on one slab: the global component label of each row's node. A node in a
    port-graph component gets its t (>= 0); a component that stays in the slab gets a negative
    label unique to (slab, local component)."""
    pidx = np.asarray(pidx, dtype=np.int64)
    nodes, local, adj_start, adj, comp = slab_graph(
        pidx, np.asarray(lseq, dtype=np.int64), np.asarray(node, dtype=np.int64)
    )
    if len(nodes) == 0:
        return np.empty(0, dtype=np.int64)
    node_t = np.full(len(nodes), -1, dtype=np.int64)
    where = np.searchsorted(nodes, port_node)
    if len(port_node) and (np.any(where >= len(nodes)) or np.any(nodes[where] != port_node)):
        raise ComponentMismatchError(f"slab {slab}: a port-graph vertex has no event here")
    node_t[where] = port_t
    n_comp = int(comp.max()) + 1
    found = _labels(comp, n_comp, adj_start, adj, node_t)
    local_label = -(1 + slab * _LOCAL_LABEL_SLAB + np.arange(n_comp, dtype=np.int64))
    label = np.where(found >= 0, found, local_label)
    result: np.ndarray = label[comp[local]]
    return result
