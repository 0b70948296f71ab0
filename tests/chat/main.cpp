#define BOOST_TEST_MODULE chat
#include <boost/test/unit_test.hpp>
