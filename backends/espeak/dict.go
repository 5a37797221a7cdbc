package espeak

import (
	"encoding/binary"
	"os"

	"github.com/sluice-dev/sluice/backends"
)

// Dictionary layout (espeak-ng's dictionary.c, LoadDictionary and
// InitGroups): a 32-bit hash count (nHashDict), the offset of the rules,
// then one chain per hash of length-prefixed entries ending with a zero
// byte, which must end exactly at the rules; the rules are groups that
// start with ruleGroupStart, and the file ends with a zero byte.
const (
	nHashDict      = 1024
	ruleGroupStart = 6
	maxDictBytes   = 64 << 20
)

// checkDict reads the dictionary at p the way eSpeak NG will and refuses
// what would send it past the file (CONTRACT.md engine.load-safety): a
// wrong hash count, a rules offset outside the file, a chain that runs
// past the rules, rules that do not start a group or a file not ending
// with zero. eSpeak NG trusts these and crashes on the first word it
// looks up in a damaged dictionary, which one probe synthesis (child.go)
// need not meet.
func checkDict(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return backends.Invalidf("espeak: dictionary %s: %v", p, err)
	}
	if st.Size() > maxDictBytes {
		return backends.Invalidf("espeak: dictionary %s is %d bytes, more than %d", p, st.Size(), maxDictBytes)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return backends.Invalidf("espeak: dictionary %s: %v", p, err)
	}
	bad := func(why string) error { return backends.Invalidf("espeak: dictionary %s is damaged: %s", p, why) }
	if len(b) <= nHashDict+8 {
		return bad("too short")
	}
	if n := binary.LittleEndian.Uint32(b); n != nHashDict {
		return bad("wrong hash count (not an eSpeak NG dictionary)")
	}
	rules := int64(int32(binary.LittleEndian.Uint32(b[4:])))
	if rules <= 8 || rules >= int64(len(b)) {
		return bad("rules offset outside the file")
	}
	at := 8
	for range nHashDict {
		for at < int(rules) && b[at] != 0 {
			at += int(b[at])
		}
		if at >= int(rules) {
			return bad("a hash chain runs past the rules")
		}
		at++
	}
	switch {
	case at != int(rules):
		return bad("the hash chains do not end at the rules")
	case b[rules] != ruleGroupStart:
		return bad("the rules do not start with a group")
	case b[len(b)-1] != 0:
		return bad("the rules are not terminated")
	}
	return nil
}
