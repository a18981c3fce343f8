package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Digest identifies an inventory (a set of Deployments, one per namespace/name) whatever its
// order: the XOR of each entry's sha256. Adding, changing or removing one entry updates it in
// constant time, so neither side walks the whole inventory to follow a change. XOR of hashes is
// not collision-resistant against someone choosing the entries; both sides compute it over
// entries the Manager read from the cluster, to detect drift, not tampering.
type Digest [sha256.Size]byte

// Toggle adds d to the digest, or removes it if it is there.
func (g *Digest) Toggle(d Deployment) {
	entry := d.Namespace + "\x00" + d.Name + "\x00" + strconv.Itoa(int(d.Replicas)) + "\x00" +
		strconv.Itoa(int(d.ReadyReplicas)) + "\x00" + d.GraphRevision
	// The CapProxyStatus fields count only when set, so an entry without them hashes as it did
	// before them, on both sides, whatever their versions.
	if d.Phase != "" || d.ReadyReason != "" || d.AvailableRevision != "" {
		entry += "\x00" + d.Phase + "\x00" + d.ReadyReason + "\x00" + d.AvailableRevision
	}
	h := sha256.Sum256([]byte(entry))
	for i := range g {
		g[i] ^= h[i]
	}
}

// String is the digest in hex; the empty inventory's is all zeros.
func (g Digest) String() string { return hex.EncodeToString(g[:]) }

// EmptyInventory is the digest of the empty inventory.
var EmptyInventory = Digest{}.String()

// Key is a Deployment's namespace/name.
func (d Deployment) Key() ObjectRef { return ObjectRef{Namespace: d.Namespace, Name: d.Name} }
