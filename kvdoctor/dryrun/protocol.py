"""Line prefixes the compiler child writes on stdout, shared by child and parent."""

START = "KVDOCTOR-START"
RESULT = "KVDOCTOR-RESULT"
