package udpdriver

import "errors"

// errMsgSize stands for EMSGSIZE, which this system does not name: no
// error matches it.
var errMsgSize = errors.New("udpdriver: EMSGSIZE")
