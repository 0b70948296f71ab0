#define BOOST_TEST_MODULE io
#include <boost/test/unit_test.hpp>
