package comm

// Binomial trees over the ranks of a communicator, rotated so that root
// is the tree's rank 0 ("virtual rank" v = (rank-root) mod n). The subtree
// of v covers the virtual ranks [v, v+span(v)), which the gather relies on.

func vrank(rank, root, n int) int { return (rank - root + n) % n }
func realRank(v, root, n int) int { return (v + root) % n }

// parent of virtual rank v > 0: v without its lowest set bit.
func treeParent(v int) int { return v & (v - 1) }

// treeChildren of virtual rank v, largest subtree first (so that the
// deepest branch starts earliest).
func treeChildren(v, n int) []int {
	var kids []int
	for bit := 1; bit < n; bit <<= 1 {
		if v&bit != 0 {
			break
		}
		if v|bit < n {
			kids = append(kids, v|bit)
		}
	}
	for i, j := 0, len(kids)-1; i < j; i, j = i+1, j-1 {
		kids[i], kids[j] = kids[j], kids[i]
	}
	return kids
}

// span is the number of virtual ranks in v's subtree.
func span(v, n int) int {
	s := 1
	if v == 0 {
		return n
	}
	for v&s == 0 {
		s <<= 1
	}
	return min(s, n-v)
}
