package limit

import (
	"fmt"
	"net/http"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// A limit's variants (api.LimitVariant) split its clients by a stable hash
// of the limit's key: FNV-1a (64-bit) over the limit's id, a 0 byte and the
// key's text (KeyText's form), taken modulo 100. The variants take the
// buckets in document order: the first variant of weight w gets buckets
// [0, w), the next the following ones, and the clients in no variant's
// buckets get the limit itself ("base"). The hash has no seed, so a client
// gets the same variant on every node and after every restart; hashing the
// limit's id too lets two limits with the same key choose different clients.

// BaseVariant is the variant label of the clients of a limit with variants
// that no variant took.
const BaseVariant = api.BaseVariant

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// VariantBucket returns the bucket (0-99) of key for limit ruleID: the
// stable hash described above. Tools and tests use it to predict which
// variant a client gets.
func VariantBucket(ruleID, key string) int {
	h := uint64(fnvOffset64)
	for i := 0; i < len(ruleID); i++ {
		h = (h ^ uint64(ruleID[i])) * fnvPrime64
	}
	h = (h ^ 0) * fnvPrime64
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * fnvPrime64
	}
	return int(h % 100)
}

// variantOf returns the index of the variant bucket b falls into given the
// variants' cumulative upper bounds (ends[i] = sum of weights 0..i), or −1
// for the base limit.
func variantOf(ends []int, b int) int {
	for i, e := range ends {
		if b < e {
			return i
		}
	}
	return -1
}

// compileVariants compiles ru.l's variants, each from the same variant of
// prev (matched by id) when there is one, so that its state carries over.
func (ru *rule) compileVariants(prev *rule, opts Options, now int64) error {
	total := 0
	for i, v := range ru.l.Variants {
		var pv *rule
		if prev != nil {
			for _, o := range prev.variants {
				if o.variant == v.ID {
					pv = o
				}
			}
		}
		vr, err := compileOne(ru.l.WithVariant(v), pv, opts, now, v.ID, "")
		if err != nil {
			return fmt.Errorf("variants[%d]: %w", i, err)
		}
		total += v.Weight
		ru.variants = append(ru.variants, vr)
		ru.ends = append(ru.ends, total)
	}
	return nil
}

// pick returns the rule that applies to v's client: one of ru's variants or
// ru itself (see VariantBucket). It builds the key's text (one allocation),
// which only limits with variants pay for.
func (ru *rule) pick(v *reqview.View) *rule {
	if i := variantOf(ru.ends, VariantBucket(ru.l.ID, ru.key.Text(v))); i >= 0 {
		return ru.variants[i]
	}
	return ru
}

// VariantOf returns the variant a client whose key text is key gets under
// limit l: a variant id, or BaseVariant; "" when l has no variants.
func VariantOf(l *api.Limit, key string) string {
	if len(l.Variants) == 0 {
		return ""
	}
	b, end := VariantBucket(l.ID, key), 0
	for _, v := range l.Variants {
		if end += v.Weight; b < end {
			return v.ID
		}
	}
	return BaseVariant
}

// KeyText returns the text of limit l's key (l normalized) for request r of
// info: what VariantOf takes and decision logs show. It returns the key's
// parse error.
func KeyText(l *api.Limit, r *http.Request, info RequestInfo) (string, error) {
	ks, err := classify.ParseLimitKey(l)
	if err != nil {
		return "", err
	}
	v := info.View(r)
	return ks.Text(&v), nil
}
